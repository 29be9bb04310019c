//! What the CLI tests share: running the tool (standard input fed through a pipe, a
//! panic or backtrace on standard error failing the test), scratch directories, and the
//! tool's peak memory measured from a fresh process.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The tool under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_tensordesc");
/// One mebibyte.
pub const MIB: u64 = 1 << 20;

// ---------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------

/// What a run of the tool gave.
pub struct Run {
    /// The exit status (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Run the tool with `args`, `stdin` (if any) fed through a pipe by a thread.
pub fn run_with(args: &[&str], stdin: Option<Vec<u8>>) -> Run {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tensordesc binary runs");
    let feeder = child.stdin.take().map(|mut w| {
        let bytes = stdin.unwrap_or_default();
        // The tool may stop reading early (an error): a broken pipe is expected then.
        std::thread::spawn(move || drop(w.write_all(&bytes)))
    });
    let out = child.wait_with_output().unwrap();
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        // Lossy: a test below checks that no raw control byte reaches the output.
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !r.stderr.contains("panicked") && !r.stderr.contains("RUST_BACKTRACE"),
        "{args:?} panicked:\n{}",
        r.stderr
    );
    r
}

/// Run the tool with `args` and no standard input.
pub fn run(args: &[&str]) -> Run {
    run_with(args, None)
}

/// `path` as a command-line argument.
pub fn p(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// A fresh directory for one test, under Cargo's per-target temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-tests")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What [`peak_rss`] measured.
#[derive(Debug)]
pub struct Peak {
    /// Exit status (-1 when killed at the deadline).
    pub code: i32,
    /// `ru_maxrss`, bytes.
    pub rss: u64,
    pub elapsed: Duration,
    pub timed_out: bool,
    /// Bytes fed to the tool's standard input before it stopped reading.
    pub fed: u64,
    pub stderr: String,
}

/// What [`peak_rss`] feeds the tool's standard input.
pub enum Feed<'a> {
    Nothing,
    /// A file's bytes.
    File(&'a Path),
    /// This many zero bytes.
    Zeros(u64),
}

/// Run the tool with `args` and report its exit status, peak resident set size and how
/// long it ran (killed after `deadline`).
///
/// A child's `ru_maxrss` starts at the resident size of the process it was spawned from
/// (Linux carries the high-water mark across `exec`), and this test process holds far more
/// than the tool does. So the tool is spawned from a fresh, small process: this test
/// binary re-run with only `convert_rss_helper`, which spawns the tool, feeds its standard
/// input, waits for it and prints its figures.
pub fn peak_rss(args: &[&str], feed: Feed<'_>, deadline: Duration) -> Peak {
    let feed = match feed {
        Feed::Nothing => String::new(),
        Feed::File(f) => format!("file:{}", p(f)),
        Feed::Zeros(n) => format!("zeros:{n}"),
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "support::rss_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TDESC_RSS_ARGS", args.join("\u{1f}"))
        .env("TDESC_RSS_FEED", feed)
        .env("TDESC_RSS_DEADLINE_MS", deadline.as_millis().to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split("PEAK_RSS ").nth(1))
        .unwrap_or_else(|| panic!("no figures from the helper:\n{stdout}"));
    let f: Vec<i64> = line
        .split_whitespace()
        .map(|x| x.parse::<i64>().unwrap())
        .collect();
    let stderr = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TOOL_STDERR "))
        .unwrap_or("")
        .replace("\\n", "\n");
    Peak {
        code: f[0] as i32,
        rss: f[1] as u64,
        elapsed: Duration::from_millis(f[2] as u64),
        timed_out: f[3] != 0,
        fed: f[4] as u64,
        stderr,
    }
}

/// Not a test by itself: run by `peak_rss` in a fresh process (see there).
#[test]
#[ignore = "a helper of the peak-memory tests, run in a fresh process"]
fn rss_helper() {
    let Ok(args) = std::env::var("TDESC_RSS_ARGS") else {
        return;
    };
    let feed = std::env::var("TDESC_RSS_FEED").unwrap_or_default();
    let deadline = Duration::from_millis(
        std::env::var("TDESC_RSS_DEADLINE_MS")
            .unwrap()
            .parse()
            .unwrap(),
    );
    // Reaped by wait4 below, which also gives its resource usage.
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(BIN)
        .args(args.split('\u{1f}'))
        .stdin(if feed.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let feeder = child.stdin.take().map(|mut w| {
        std::thread::spawn(move || {
            // Fed in 1 MiB pieces; stops at the first failed write (the tool stopped
            // reading and exited: a broken pipe).
            let mut piece = vec![0u8; MIB as usize];
            let mut fed = 0u64;
            if let Some(path) = feed.strip_prefix("file:") {
                let mut f = std::fs::File::open(path).unwrap();
                loop {
                    let n = f.read(&mut piece).unwrap();
                    if n == 0 || w.write_all(&piece[..n]).is_err() {
                        break;
                    }
                    fed += n as u64;
                }
            } else if let Some(n) = feed.strip_prefix("zeros:") {
                let mut left: u64 = n.parse().unwrap();
                while left > 0 {
                    let k = left.min(MIB) as usize;
                    if w.write_all(&piece[..k]).is_err() {
                        break;
                    }
                    fed += k as u64;
                    left -= k as u64;
                }
            }
            fed
        })
    });
    let mut err = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut timed_out = false;
    // SAFETY: wait4 on our own child writes its status and the zeroed rusage it is given;
    // kill signals only that child, which is not yet reaped (wait4 returned 0 for it).
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        loop {
            let got = libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru);
            assert!(got == 0 || got == pid, "wait4: {got}");
            if got == pid {
                break;
            }
            if start.elapsed() > deadline {
                timed_out = true;
                libc::kill(pid, libc::SIGKILL);
                assert_eq!(libc::wait4(pid, &mut status, 0, &mut ru), pid);
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        ru
    };
    let elapsed = start.elapsed();
    let fed = feeder.map_or(0, |f| f.join().unwrap());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    println!(
        "PEAK_RSS {code} {} {} {} {fed}",
        ru.ru_maxrss as u64 * 1024,
        elapsed.as_millis(),
        u8::from(timed_out)
    );
    println!(
        "TOOL_STDERR {}",
        stderr.join().unwrap().replace('\n', "\\n")
    );
}
