//! The `tensordesc` command line as a library: [`run`] parses arguments and runs a command
//! exactly as the `tensordesc` binary does (the binary is a thin wrapper around it; the
//! Python package's `tensordesc` console script calls it too), and [`convert`] is the
//! `convert` command for programs: paths and [`ConvertOptions`] in, a
//! [`tensordesc::Error`] out, nothing printed.
//!
//! `demo` writes a quantized, pruned checkpoint, opens it in place and converts it; `inspect`, `validate` and
//! `locate` read descriptors, `.tdf` files and stream captures; `export` writes a box of a
//! tensor as a NumPy `.npy`; `convert` turns a safetensors file into a `.tdf`. Errors are
//! one line, `error: STATUS_NAME: detail`. docs/cli.md describes the commands.

mod commands;
mod convert;
mod demo;
mod export;
mod input;
mod json;
mod text;

use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use tensordesc::{Error, ErrorKind};

const ABOUT: &str = "Encode, inspect, validate and address tensor descriptors: \
one logical tensor however it is stored (dense, sparse, block-paged, splat, or a subpaving \
of regions that each have their own layout, buffers and quantization).";

const AFTER_HELP: &str = "\
Inputs are recognised by their first bytes: a bare descriptor (\"TDSC\"), a .tdf file
(89 54 44 46 0D 0A 1A 0A), a safetensors file (an 8-byte header length, then '{'; read in
place: its tensors are described where they lie) or a frame-stream capture (a
STREAM_START frame). Files named
*.hex are read as annotated hex text (the format of tests/vectors/); `-` reads standard
input (e.g. a stream piped from a producer); `inspect -` prints each tensor of a stream as
soon as its last byte has arrived.

Exit status: 0 success; 1 invalid input or a failed operation; 2 usage or I/O error.
Errors print one line: `error: STATUS_NAME: detail`.

Start here:  tensordesc demo";

/// The command line.
#[derive(Parser)]
#[command(name = "tensordesc", version, about = ABOUT, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// List a quantized checkpoint's own tensors: do not group the pieces of quantized
    /// weights (NVFP4 codes, scales and global scale; FP8 weights and their scales; MXFP4
    /// blocks and scales) into one tensor each.
    #[arg(long, global = true)]
    raw: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Write a small quantized, pruned checkpoint (NVFP4 and FP8-block weights in their
    /// safetensors pieces, a pruned BF16 weight), open it in place, read a window
    /// dequantized, convert it to a .tdf (the pruned weight as CSR), checking every value.
    Demo {
        /// The directory to write the checkpoint into (default: tensordesc-demo in the temp
        /// directory; its parent must exist).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Print a descriptor, .tdf file, safetensors file or stream capture as a tree:
    /// tensors, regions, buffers (roles, sizes, devices), quantization and the file's
    /// metadata.
    Inspect {
        /// Emit JSON (documented in docs/json-schema.md) instead of the tree.
        #[arg(long)]
        json: bool,
        /// Decode permissively: keep unknown layouts, regions and schemes as opaque parts.
        #[arg(long)]
        permissive: bool,
        /// The input (`-`: standard input; a stream's tensors are printed as they complete,
        /// except with --json, which prints one document at the end).
        file: PathBuf,
    },
    /// Validate inputs: prints `FILE: STATUS_NAME: detail` per failure; exits 0 when all
    /// are valid, 1 when any is invalid, 2 on usage or I/O errors. Without --contents only
    /// the structure is checked (the OK line says so), not the buffer contents.
    Validate {
        /// Decode permissively (unknown layouts, regions, schemes and newer minor versions
        /// are kept opaque instead of rejected).
        #[arg(long)]
        permissive: bool,
        /// Also bind every tensor to its data and validate the buffer contents (sparse
        /// indices, block tables, quantization parameters). Needs a file or stream.
        #[arg(long)]
        contents: bool,
        /// The inputs.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Where an element lives (region path, buffer, byte offset or lookup) and, when the
    /// input carries the data, its stored bytes and (dequantized) value.
    Locate {
        /// The input.
        file: PathBuf,
        /// The tensor to use when the input holds several.
        #[arg(long, value_name = "NAME")]
        tensor: Option<String>,
        /// Decode permissively.
        #[arg(long)]
        permissive: bool,
        /// Read the element without validating the tensor's buffer contents first (by
        /// default the whole tensor is validated, as `validate --contents` does, so corrupt
        /// sparse indices or block tables are reported instead of read).
        #[arg(long)]
        no_validate: bool,
        /// The element index, comma-separated (`-` for a scalar), e.g. `3500,3000`.
        #[arg(value_name = "I,J,...", allow_hyphen_values = true)]
        index: String,
    },
    /// Write a box of a tensor (the whole tensor by default) as a NumPy .npy file, read
    /// through the library's windowed read: stored codes (raw) or values in f32, f64, f16
    /// or bf16, dequantized region by region. BFLOAT16 has no NumPy dtype: it is written
    /// as `|V2` (the raw bfloat16 bits; --dtype f32 gives the same values exactly).
    Export {
        /// The input (a .tdf or safetensors file, or a stream capture).
        file: PathBuf,
        /// The tensor to export when the input holds several.
        #[arg(long, value_name = "NAME")]
        tensor: Option<String>,
        /// The box, `lo:hi` per axis (half-open; `:` for a whole axis), e.g. `0:128,0:64`.
        #[arg(long = "box", value_name = "LO:HI,...", allow_hyphen_values = true)]
        box_: Option<String>,
        /// raw (the stored codes, NumPy's dtype for the element type), f32, f64, f16 or
        /// bf16. Default: raw for an unquantized tensor, f32 for one with quantized parts.
        #[arg(long, value_name = "TYPE")]
        dtype: Option<String>,
        /// Decode permissively.
        #[arg(long)]
        permissive: bool,
        /// The .npy to write (through a temporary file beside it, renamed when complete).
        #[arg(short = 'o', long = "out", value_name = "OUT.npy")]
        output: PathBuf,
    },
    /// Convert a safetensors file into a .tdf: every tensor becomes a dense ROW_MAJOR
    /// descriptor with its bytes (quantized weights stored in pieces become one tensor of
    /// codes and scales, unless --raw). The safetensors __metadata__ becomes the .tdf's
    /// metadata map. A sharded checkpoint (its *.safetensors.index.json, or the directory
    /// holding it) becomes one .tdf. Given a .tdf file
    /// (e.g. container version 1), rewrite it as container version 2. Memory stays at a
    /// few MB whatever the tensors' sizes: the directory is written first, then the data
    /// streams through.
    Convert {
        /// The .safetensors, *.safetensors.index.json (or its directory) or .tdf input.
        input: PathBuf,
        /// The .tdf output (written to a temporary file beside it, renamed when complete;
        /// it must not be the input).
        output: PathBuf,
        /// Print nothing on success: no summary, no per-tensor lines, no progress bar
        /// (errors still print).
        #[arg(long, short)]
        quiet: bool,
        /// The .tdf data_buffer_alignment (a power of two, 64 ..= 1048576); by default 64,
        /// or a .tdf input's own.
        #[arg(long, value_name = "BYTES")]
        alignment: Option<u32>,
        /// Read a .tdf input permissively: tensors it cannot interpret (unknown layouts)
        /// are copied as they are.
        #[arg(long)]
        permissive: bool,
    },
}

/// Why a command stopped.
pub(crate) enum CliError {
    /// A library or tool error: printed as `error: STATUS: detail`.
    Tool(Error),
    /// stdout was closed by the reader (`| head`): stop quietly.
    BrokenPipe,
}

impl From<Error> for CliError {
    fn from(e: Error) -> CliError {
        CliError::Tool(e)
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> CliError {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::BrokenPipe
        } else {
            CliError::Tool(Error::new(
                ErrorKind::Io,
                format!("writing output failed: {e}"),
            ))
        }
    }
}

/// Result of a command: its exit status.
pub(crate) type CliResult<T> = Result<T, CliError>;

/// Exit status for an error: usage and I/O problems 2, everything else 1.
pub(crate) fn exit_status(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Io | ErrorKind::InvalidArgument => 2,
        _ => 1,
    }
}

/// One line, never a backtrace: `error: STATUS_NAME: detail`.
pub(crate) fn error_line(e: &Error) -> String {
    // Keep it on one line whatever the detail holds.
    let detail = e.detail.replace(['\n', '\r'], " ");
    format!("error: {}: {detail}", e.kind.name())
}

/// Run the command line `args` (the program name first, as in `std::env::args_os()`) as
/// the `tensordesc` binary does, and return its exit status: 0 success, 1 invalid input or
/// a failed operation, 2 usage or I/O error.
///
/// The arguments are parsed with clap: `--help` and `--version` print to standard output
/// and return 0, a usage error prints clap's message to standard error and returns 2. The
/// command writes to standard output (through a buffer, flushed before this returns,
/// whatever the outcome) and reports an error as one line on standard error,
/// `error: STATUS_NAME: detail`. A reader that closes standard output early (`| head`)
/// stops the command quietly, with status 0. The program name's file name is the name
/// usage lines show.
///
/// Standard input is read by the commands given `-`. A panic (a bug) unwinds out of this
/// function; [`report_panics_as_errors`] makes it print one line first.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // What clap's `Error::exit` prints, where it prints it (help and version on
            // standard output), without exiting the process.
            let _ = e.print();
            let _ = io::stdout().flush();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    input::with_raw(cli.raw, || run_command(cli.command))
}

/// Run one parsed command, writing to standard output; its exit status.
fn run_command(command: Command) -> u8 {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = match command {
        Command::Demo { out: path } => demo::run(path.as_deref(), &mut out).map(|()| 0),
        Command::Inspect {
            json,
            permissive,
            file,
        } => commands::inspect(&file, json, permissive, &mut out).map(|()| 0),
        Command::Validate {
            permissive,
            contents,
            files,
        } => commands::validate(&files, permissive, contents, &mut out),
        Command::Locate {
            file,
            tensor,
            permissive,
            no_validate,
            index,
        } => commands::locate(
            &file,
            tensor.as_deref(),
            permissive,
            !no_validate,
            &index,
            &mut out,
        )
        .map(|()| 0),
        Command::Export {
            file,
            tensor,
            box_,
            dtype,
            permissive,
            output,
        } => export::run(
            &file,
            tensor.as_deref(),
            box_.as_deref(),
            dtype.as_deref(),
            &output,
            permissive,
            &mut out,
        )
        .map(|()| 0),
        Command::Convert {
            input,
            output,
            quiet,
            alignment,
            permissive,
        } => convert::run(&input, &output, alignment, permissive, quiet, &mut out).map(|()| 0),
    };
    let flushed = out.flush();
    match (result, flushed) {
        (Err(CliError::BrokenPipe), _) => 0,
        (Err(CliError::Tool(e)), _) => {
            eprintln!("{}", error_line(&e));
            exit_status(e.kind)
        }
        (Ok(_), Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        (Ok(_), Err(e)) => {
            eprintln!("error: IO: writing output failed: {e}");
            2
        }
        (Ok(code), Ok(())) => code,
    }
}

/// Make a panic (a bug in the tool or the library) print one line on standard error,
/// `error: INTERNAL: MESSAGE at FILE:LINE (a bug; please report it)`, instead of Rust's
/// message and backtrace note. It replaces the process's panic hook: for a process whose
/// job is the command line (the `tensordesc` binary and console script), not for a
/// library's caller.
pub fn report_panics_as_errors() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("error: INTERNAL: {msg}{at} (a bug; please report it)");
    }));
}

/// The options of [`convert`]: those of `tensordesc convert` (and the global `--raw`)
/// that change what is written. The default is the command's default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConvertOptions {
    /// The output's `data_buffer_alignment` (a power of two, 64 ..= 1048576; `--alignment`);
    /// `None`: 64, or a `.tdf` input's own.
    pub alignment: Option<u32>,
    /// Read a `.tdf` input permissively, copying the tensors it cannot interpret as they are
    /// (`--permissive`).
    pub permissive: bool,
    /// Write a quantized checkpoint's own tensors instead of grouping the pieces of
    /// quantized weights into codes and scales (`--raw`).
    pub raw: bool,
}

/// Convert `input` into the `.tdf` `output`, as `tensordesc convert -q INPUT OUTPUT` does,
/// printing nothing: a safetensors file (every tensor a dense ROW_MAJOR descriptor with its
/// bytes, quantized weights stored in pieces grouped unless `options.raw`, the
/// `__metadata__` as the file's metadata map), a sharded checkpoint (its
/// `*.safetensors.index.json`, or the directory holding it), a GGUF file, or a `.tdf`
/// (rewritten as container version 2). The output is written to a temporary file beside
/// it and renamed when complete; it must not be the input. Memory stays at a few MB
/// whatever the tensors' sizes.
///
/// # Errors
///
/// The error `tensordesc convert` would print: `IO` for a missing or unreadable input or
/// an unwritable output, `ALIGNMENT_INVALID` for an alignment that is not a power of two
/// in 64 ..= 1048576, `INVALID_ARGUMENT` for the input given as its own output, and the
/// reading and writing errors of the library for an input it cannot convert.
pub fn convert(input: &Path, output: &Path, options: &ConvertOptions) -> tensordesc::Result<()> {
    input::with_raw(options.raw, || {
        convert::run(
            input,
            output,
            options.alignment,
            options.permissive,
            true,
            &mut io::sink(),
        )
    })
    .map_err(|e| match e {
        CliError::Tool(e) => e,
        // Nothing is written to the sink.
        CliError::BrokenPipe => Error::new(ErrorKind::Io, "writing output failed: broken pipe"),
    })
}
