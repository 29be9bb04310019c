/* Live frame streams from C11 + POSIX.
 *
 * A producer and a consumer in two processes (fork), over a socketpair
 * (tdesc_stream_writer_open_fd), over a FIFO opened by path (tdesc_stream_writer_open) and
 * over a pipe written through a callback (tdesc_stream_writer_open_callback). The consumer
 * feeds what it reads to a stream reader and acknowledges every event on a second pipe;
 * the producer makes its next writer call only after the acknowledgement of the frames of
 * the previous one (STREAM_START after the open, TENSOR_COMPLETE after an add, DESCRIPTOR
 * after a begin, the bytes of each data call, STREAM_END after the finish). Every wait is a
 * poll() with a timeout, so a writer that holds frames back fails the test instead of
 * hanging it; an alarm() stops either process if anything else blocks.
 *
 * In one process: the callback writer (every byte passed to the callback by the time each
 * call returns; a non-zero return becomes TDESC_ERR_IO with the value in the detail, breaks
 * the writer, and the callback is never called again, not even by free), the descriptor
 * writer's ownership (the caller's descriptor stays open and usable after finish and free)
 * and its errors (negative, closed, a pipe without reader).
 *
 * usage: test_live_stream SCRATCH_DIR   (the FIFO is made there; see capi/lib/tests/c_abi/c_api.rs)
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* How long either side waits for the other's next bytes. */
#define WAIT_MS 5000
/* The last resort if a process blocks anywhere else (a FIFO open, a full pipe). */
#define WATCHDOG_S 120

#define N_TENSORS 3
static const char *const names[N_TENSORS] = {"t0", "t1", "t2"};
static tdesc_descriptor *descs[N_TENSORS];
static uint8_t *datas[N_TENSORS];
static size_t sizes[N_TENSORS];
/* Where tensor 2, written with begin + data, is split. */
#define PIECE 100

static char scratch[4096];

/* ------------------------------------------------------------------ tensors */

static tdesc_descriptor *row_major(uint8_t et, const uint64_t *shape, size_t rank) {
    tdesc_node_spec *n = NULL;
    tdesc_builder *b = NULL;
    tdesc_descriptor *d = NULL;
    OK(tdesc_node_new_row_major(&n));
    OK(tdesc_builder_new(et, shape, rank, n, &b));
    OK(tdesc_builder_build(b, &d));
    tdesc_builder_free(b);
    return d;
}

/* t0: UINT8 [16]; t1: UINT8 [300000] (larger than any pipe or socket buffer); t2: FLOAT32
 * [64, 8], written in two pieces. Byte i of tensor t is (31 t + 7 i + 1) mod 256. */
static void make_tensors(void) {
    const uint64_t s0[1] = {16}, s1[1] = {300000}, s2[2] = {64, 8};
    descs[0] = row_major(TDESC_ELEMENT_UINT8, s0, 1);
    descs[1] = row_major(TDESC_ELEMENT_UINT8, s1, 1);
    descs[2] = row_major(TDESC_ELEMENT_FLOAT32, s2, 2);
    for (size_t t = 0; t < N_TENSORS; ++t) {
        tdesc_buffer b;
        CHECK(descs[t] != NULL && tdesc_descriptor_buffer_count(descs[t]) == 1);
        OK(tdesc_descriptor_buffer(descs[t], 0, &b));
        sizes[t] = (size_t)b.size_bytes;
        datas[t] = malloc(sizes[t]);
        CHECK(datas[t] != NULL);
        for (size_t i = 0; datas[t] && i < sizes[t]; ++i) {
            datas[t][i] = (uint8_t)(31u * t + 7u * i + 1u);
        }
    }
}

static void free_tensors(void) {
    for (size_t t = 0; t < N_TENSORS; ++t) {
        tdesc_descriptor_free(descs[t]);
        free(datas[t]);
    }
}

/* ------------------------------------------------------------------ plumbing */

static int write_all_fd(int fd, const void *bytes, size_t len) {
    const uint8_t *p = bytes;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* 0 when `len` bytes were read, -1 at end of input or on an error. */
static int read_exact(int fd, void *bytes, size_t len) {
    uint8_t *p = bytes;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A tdesc_stream_write_fn that writes to a file descriptor and counts its calls. */
typedef struct {
    int fd;
    int calls;
} fd_target;

static int write_to_fd(void *user, const void *bytes, size_t len) {
    fd_target *t = user;
    ++t->calls;
    return write_all_fd(t->fd, bytes, len);
}

/* What the consumer reports for each event it sees (16 bytes: one atomic pipe write). */
typedef struct {
    uint32_t kind; /* tdesc_stream_event_kind, or ACK_FAILED */
    uint32_t tensor;
    uint64_t received; /* bytes of the current tensor so far */
} ack;
#define ACK_FAILED 99u

static void send_ack(int fd, uint32_t kind, uint64_t tensor, uint64_t received) {
    ack a = {kind, (uint32_t)tensor, received};
    CHECK(write_all_fd(fd, &a, sizeof a) == 0);
}

/* ------------------------------------------------------------------ consumer */

/* Read the stream from `in` as it arrives, check every tensor against the sources and
 * acknowledge each event on `acks`. Returns the number of failed checks. */
static int consume(int in, int acks) {
    static uint8_t chunk[65536];
    tdesc_stream_reader *r = NULL;
    OK(tdesc_stream_reader_new(TDESC_MODE_STRICT, &r));
    uint8_t *buf = NULL;
    uint64_t received = 0;
    size_t tensor = 0;
    int ended = 0;
    while (r != NULL && failed == 0) {
        struct pollfd p = {in, POLLIN, 0};
        int k = poll(&p, 1, WAIT_MS);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            fprintf(stderr, "FAIL consumer: no bytes within %d ms after tensor %zu\n", WAIT_MS,
                    tensor);
            ++failed;
            break;
        }
        ssize_t n = read(in, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            CHECK(n == 0);
            break; /* end of input */
        }
        OK(tdesc_stream_reader_feed(r, chunk, (size_t)n));
        tdesc_stream_event ev;
        tdesc_status s;
        while ((s = tdesc_stream_reader_poll(r, &ev)) == TDESC_OK &&
               ev.kind != TDESC_STREAM_EVENT_NONE) {
            switch (ev.kind) {
            case TDESC_STREAM_EVENT_DESCRIPTOR: {
                CHECK(ev.tensor_index == tensor && tensor < N_TENSORS);
                CHECK(tensor < N_TENSORS && ev.name_len == strlen(names[tensor]) &&
                      strcmp(ev.name, names[tensor]) == 0);
                CHECK(tdesc_descriptor_buffer_count(ev.descriptor) == 1);
                tdesc_buffer b;
                OK(tdesc_descriptor_buffer(ev.descriptor, 0, &b));
                CHECK(tensor < N_TENSORS && b.size_bytes == sizes[tensor]);
                free(buf);
                buf = malloc(b.size_bytes);
                CHECK(buf != NULL);
                received = 0;
                break;
            }
            case TDESC_STREAM_EVENT_DATA:
                CHECK(ev.buffer_index == 0 && ev.offset == received);
                CHECK(tensor < N_TENSORS && ev.offset + ev.data_len <= sizes[tensor]);
                if (buf && tensor < N_TENSORS && ev.offset + ev.data_len <= sizes[tensor]) {
                    memcpy(buf + ev.offset, ev.data, ev.data_len);
                }
                received += ev.data_len;
                break;
            case TDESC_STREAM_EVENT_TENSOR_COMPLETE:
                CHECK(ev.tensor_index == tensor && tensor < N_TENSORS);
                CHECK(tensor < N_TENSORS && received == sizes[tensor] && buf != NULL &&
                      memcmp(buf, datas[tensor], sizes[tensor]) == 0);
                break;
            case TDESC_STREAM_EVENT_STREAM_END:
                ended = 1;
                break;
            default:
                break;
            }
            send_ack(acks, (uint32_t)ev.kind, ev.tensor_index, received);
            if (ev.kind == TDESC_STREAM_EVENT_TENSOR_COMPLETE) {
                ++tensor;
            }
        }
        OK(s);
    }
    CHECK(ended && tensor == N_TENSORS);
    if (failed == 0) {
        OK(tdesc_stream_reader_finish(r));
    }
    if (failed != 0) {
        send_ack(acks, ACK_FAILED, tensor, received);
    }
    free(buf);
    tdesc_stream_reader_free(r);
    return failed;
}

/* ------------------------------------------------------------------ producer */

/* Wait until the consumer acknowledges an event `kind` of `tensor` with at least
 * `received` bytes of it; 0 after WAIT_MS without it, or when the consumer failed. */
static int wait_ack(int acks, uint32_t kind, uint32_t tensor, uint64_t received,
                    const char *after) {
    for (;;) {
        struct pollfd p = {acks, POLLIN, 0};
        int k = poll(&p, 1, WAIT_MS);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            fprintf(stderr,
                    "FAIL producer: %d ms after %s returned, the consumer has not seen event %u "
                    "of tensor %u (%llu bytes): the frames did not reach it\n",
                    WAIT_MS, after, kind, tensor, (unsigned long long)received);
            return 0;
        }
        ack a;
        if (read_exact(acks, &a, sizeof a) != 0) {
            fprintf(stderr, "FAIL producer: the consumer is gone (after %s)\n", after);
            return 0;
        }
        if (a.kind == ACK_FAILED) {
            fprintf(stderr, "FAIL producer: the consumer failed (after %s)\n", after);
            return 0;
        }
        if (a.kind == kind && a.tensor == tensor && a.received >= received) {
            return 1;
        }
    }
}

/* One writer call, then the wait for the consumer to see what it wrote. */
static int step(tdesc_status s, int acks, uint32_t kind, uint32_t tensor, uint64_t received,
                const char *what) {
    if (s != TDESC_OK) {
        ++failed;
        fprintf(stderr, "FAIL producer: %s gave %s: %s\n", what, tdesc_status_name(s),
                tdesc_last_error());
        return 0;
    }
    int seen = wait_ack(acks, kind, tensor, received, what);
    CHECK(seen);
    return seen;
}

/* Every call of the producer, each followed by the consumer's acknowledgement. */
static void produce(tdesc_stream_writer *w, int acks) {
    const void *b0[1] = {datas[0]}, *b1[1] = {datas[1]};
    if (!step(tdesc_stream_writer_add(w, names[0], 2, descs[0], b0, 1), acks,
              TDESC_STREAM_EVENT_TENSOR_COMPLETE, 0, sizes[0], "tdesc_stream_writer_add(t0)") ||
        !step(tdesc_stream_writer_add(w, names[1], 2, descs[1], b1, 1), acks,
              TDESC_STREAM_EVENT_TENSOR_COMPLETE, 1, sizes[1], "tdesc_stream_writer_add(t1)") ||
        !step(tdesc_stream_writer_begin(w, names[2], 2, descs[2]), acks,
              TDESC_STREAM_EVENT_DESCRIPTOR, 2, 0, "tdesc_stream_writer_begin(t2)") ||
        !step(tdesc_stream_writer_data(w, 0, datas[2], PIECE), acks, TDESC_STREAM_EVENT_DATA, 2,
              PIECE, "tdesc_stream_writer_data(t2, first piece)") ||
        !step(tdesc_stream_writer_data(w, 0, datas[2] + PIECE, sizes[2] - PIECE), acks,
              TDESC_STREAM_EVENT_TENSOR_COMPLETE, 2, sizes[2],
              "tdesc_stream_writer_data(t2, second piece)")) {
        return;
    }
    step(tdesc_stream_writer_finish(w), acks, TDESC_STREAM_EVENT_STREAM_END, 0, 0,
         "tdesc_stream_writer_finish");
}

typedef enum { OVER_SOCKETPAIR_FD, OVER_FIFO_PATH, OVER_PIPE_CALLBACK } transport;

static void producer_and_consumer(transport how) {
    static const char *const what[] = {"socketpair, tdesc_stream_writer_open_fd",
                                       "FIFO, tdesc_stream_writer_open",
                                       "pipe, tdesc_stream_writer_open_callback"};
    int acks[2], data[2] = {-1, -1};
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/live.fifo", scratch);
    CHECK(pipe(acks) == 0);
    if (how == OVER_SOCKETPAIR_FD) {
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, data) == 0);
    } else if (how == OVER_PIPE_CALLBACK) {
        CHECK(pipe(data) == 0);
    } else {
        unlink(fifo);
        CHECK(mkfifo(fifo, 0600) == 0);
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid < 0) {
        return;
    }
    if (pid == 0) {
        /* The consumer: data[0] (or the FIFO), the write end of the acknowledgements. */
        alarm(WATCHDOG_S);
        passed = failed = 0; /* this process's own checks decide its exit status */
        close(acks[0]);
        int in = data[0];
        if (how == OVER_FIFO_PATH) {
            in = open(fifo, O_RDONLY);
        } else {
            close(data[1]);
        }
        int f = in >= 0 ? consume(in, acks[1]) : 1;
        close(in);
        close(acks[1]);
        free_tensors();
        exit(f == 0 ? 0 : 1);
    }
    /* The producer: data[1] (or the FIFO), the read end of the acknowledgements. */
    close(acks[1]);
    tdesc_stream_writer *w = NULL;
    tdesc_status s = TDESC_ERR_INVALID_ARGUMENT;
    fd_target target = {data[1], 0};
    if (how == OVER_SOCKETPAIR_FD) {
        close(data[0]);
        s = tdesc_stream_writer_open_fd(data[1], &w);
    } else if (how == OVER_PIPE_CALLBACK) {
        close(data[0]);
        s = tdesc_stream_writer_open_callback(write_to_fd, &target, &w);
    } else {
        s = tdesc_stream_writer_open(fifo, &w); /* blocks until the consumer opens it */
    }
    if (step(s, acks[0], TDESC_STREAM_EVENT_STREAM_START, 0, 0, what[how])) {
        produce(w, acks[0]);
    }
    tdesc_stream_writer_free(w);
    if (how == OVER_SOCKETPAIR_FD) {
        /* The writer closed only its duplicate: the caller's descriptor is open and ours
         * to close (the consumer sees the end of input now). */
        CHECK(fcntl(data[1], F_GETFD) != -1);
        CHECK(close(data[1]) == 0);
    } else if (how == OVER_PIPE_CALLBACK) {
        CHECK(target.calls >= 7); /* at least one per call: open, add, add, begin, 2 data, finish */
        CHECK(close(data[1]) == 0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        fprintf(stderr, "FAIL: the consumer over %s did not succeed (status %d)\n", what[how],
                status);
    }
    close(acks[0]);
    if (how == OVER_FIFO_PATH) {
        unlink(fifo);
    }
    printf("producer and consumer over %s: %s\n", what[how], failed ? "FAILED" : "live");
}

/* ------------------------------------------------------------------ in one process */

/* A tdesc_stream_write_fn that keeps every byte, counts its calls and fails call
 * `fail_at` (1-based; 0: never) with `code`. */
typedef struct {
    uint8_t *bytes;
    size_t len, cap;
    int calls, fail_at, code;
} collector;

static int collect(void *user, const void *bytes, size_t len) {
    collector *c = user;
    ++c->calls;
    CHECK(len > 0 && bytes != NULL);
    if (c->calls == c->fail_at) {
        return c->code;
    }
    if (c->len + len > c->cap) {
        size_t cap = (c->len + len) * 2;
        uint8_t *p = realloc(c->bytes, cap);
        if (!p) {
            return ENOMEM;
        }
        c->bytes = p;
        c->cap = cap;
    }
    memcpy(c->bytes + c->len, bytes, len);
    c->len += len;
    return 0;
}

/* The last event a fresh reader gives for `bytes` (the stream so far), with the end of its
 * data in the tensor for DATA; TDESC_STREAM_EVENT_NONE when there is none or on an error. */
static tdesc_stream_event_kind last_event(const uint8_t *bytes, size_t len, uint64_t *tensor,
                                          uint64_t *data_end) {
    tdesc_stream_reader *r = NULL;
    tdesc_stream_event_kind last = TDESC_STREAM_EVENT_NONE;
    OK(tdesc_stream_reader_new(TDESC_MODE_STRICT, &r));
    OK(tdesc_stream_reader_feed(r, bytes, len));
    tdesc_stream_event ev;
    tdesc_status s;
    while ((s = tdesc_stream_reader_poll(r, &ev)) == TDESC_OK &&
           ev.kind != TDESC_STREAM_EVENT_NONE) {
        last = ev.kind;
        *tensor = ev.tensor_index;
        *data_end = ev.offset + ev.data_len;
    }
    OK(s);
    tdesc_stream_reader_free(r);
    return last;
}

static void test_callback_writer(void) {
    collector c = {NULL, 0, 0, 0, 0, 0};
    tdesc_stream_writer *w = NULL;
    uint64_t t = 0, end = 0;
    const void *b0[1] = {datas[0]}, *b1[1] = {datas[1]};

    EXPECT(tdesc_stream_writer_open_callback(NULL, &c, &w), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(w == NULL && c.calls == 0);
    EXPECT(tdesc_stream_writer_open_callback(collect, &c, NULL), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(c.calls == 0);

    /* After each call, everything it wrote has been handed to the callback. */
    OK(tdesc_stream_writer_open_callback(collect, &c, &w));
    CHECK(c.calls == 1 && c.len == 24);
    CHECK(last_event(c.bytes, c.len, &t, &end) == TDESC_STREAM_EVENT_STREAM_START);
    OK(tdesc_stream_writer_add(w, names[0], 2, descs[0], b0, 1));
    CHECK(c.calls == 2); /* a small tensor's frames are one write */
    CHECK(last_event(c.bytes, c.len, &t, &end) == TDESC_STREAM_EVENT_TENSOR_COMPLETE && t == 0);
    OK(tdesc_stream_writer_add(w, names[1], 2, descs[1], b1, 1));
    CHECK(last_event(c.bytes, c.len, &t, &end) == TDESC_STREAM_EVENT_TENSOR_COMPLETE && t == 1);
    OK(tdesc_stream_writer_begin(w, names[2], 2, descs[2]));
    CHECK(last_event(c.bytes, c.len, &t, &end) == TDESC_STREAM_EVENT_DESCRIPTOR && t == 2);
    OK(tdesc_stream_writer_data(w, 0, datas[2], PIECE));
    CHECK(last_event(c.bytes, c.len, &t, &end) == TDESC_STREAM_EVENT_DATA && t == 2 &&
          end == PIECE);
    int before = c.calls;
    EXPECT(tdesc_stream_writer_data(w, 1, datas[2], 1), TDESC_ERR_STREAM_ORDER);
    EXPECT(tdesc_stream_writer_finish(w), TDESC_ERR_STREAM_ORDER);
    CHECK(c.calls == before); /* refusals write nothing */
    OK(tdesc_stream_writer_data(w, 0, datas[2] + PIECE, sizes[2] - PIECE));
    CHECK(last_event(c.bytes, c.len, &t, &end) == TDESC_STREAM_EVENT_TENSOR_COMPLETE && t == 2);
    /* DATA with no tensor begun: the detail names the C function to call. */
    EXPECT(tdesc_stream_writer_data(w, 0, datas[2], 1), TDESC_ERR_STREAM_ORDER);
    CHECK(strstr(tdesc_last_error(), "tdesc_stream_writer_begin") != NULL);
    CHECK(strstr(tdesc_last_error(), "begin_tensor") == NULL);
    OK(tdesc_stream_writer_finish(w));
    CHECK(last_event(c.bytes, c.len, &t, &end) == TDESC_STREAM_EVENT_STREAM_END);
    const uint8_t *p = NULL;
    size_t n = 0;
    EXPECT(tdesc_stream_writer_bytes(w, &p, &n), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tdesc_last_error(), "callback") != NULL);
    before = c.calls;
    tdesc_stream_writer_free(w);
    CHECK(c.calls == before);

    /* The whole stream reads back. */
    tdesc_stream_reader *r = NULL;
    OK(tdesc_stream_reader_new(TDESC_MODE_STRICT, &r));
    OK(tdesc_stream_reader_feed(r, c.bytes, c.len));
    tdesc_stream_event ev;
    int complete = 0;
    while (tdesc_stream_reader_poll(r, &ev) == TDESC_OK && ev.kind != TDESC_STREAM_EVENT_NONE) {
        complete += ev.kind == TDESC_STREAM_EVENT_TENSOR_COMPLETE;
    }
    OK(tdesc_stream_reader_finish(r));
    CHECK(complete == N_TENSORS);
    tdesc_stream_reader_free(r);

    /* The callback fails on its third call (inside the second add): TDESC_ERR_IO naming the
     * value; the writer is broken and never calls back again. */
    collector f = {NULL, 0, 0, 0, 3, 28};
    w = NULL;
    OK(tdesc_stream_writer_open_callback(collect, &f, &w));
    OK(tdesc_stream_writer_add(w, names[0], 2, descs[0], b0, 1));
    EXPECT(tdesc_stream_writer_add(w, names[1], 2, descs[1], b1, 1), TDESC_ERR_IO);
    CHECK(strstr(tdesc_last_error(), "the write callback returned 28") != NULL);
    CHECK(f.calls == 3);
    EXPECT(tdesc_stream_writer_begin(w, names[2], 2, descs[2]), TDESC_ERR_IO);
    EXPECT(tdesc_stream_writer_finish(w), TDESC_ERR_IO);
    tdesc_stream_writer_free(w);
    CHECK(f.calls == 3);

    /* A failing STREAM_START fails the open. */
    collector g = {NULL, 0, 0, 0, 1, -1};
    w = NULL;
    EXPECT(tdesc_stream_writer_open_callback(collect, &g, &w), TDESC_ERR_IO);
    CHECK(w == NULL && g.calls == 1);
    CHECK(strstr(tdesc_last_error(), "returned -1") != NULL);

    free(c.bytes);
    free(f.bytes);
    free(g.bytes);
}

static void test_fd_writer(void) {
    int p[2];
    CHECK(pipe(p) == 0);
    tdesc_stream_writer *w = NULL;
    const void *b0[1] = {datas[0]};
    OK(tdesc_stream_writer_open_fd(p[1], &w));
    OK(tdesc_stream_writer_add(w, names[0], 2, descs[0], b0, 1));
    OK(tdesc_stream_writer_finish(w));
    EXPECT(tdesc_stream_writer_bytes(w, &(const uint8_t *){NULL}, NULL),
           TDESC_ERR_INVALID_ARGUMENT);
    tdesc_stream_writer_free(w);
    /* The caller's descriptor is still open and writes to the same pipe. */
    CHECK(fcntl(p[1], F_GETFD) != -1);
    CHECK(write(p[1], "!", 1) == 1);
    CHECK(close(p[1]) == 0);
    static uint8_t got[4096];
    size_t len = 0;
    for (ssize_t n; (n = read(p[0], got + len, sizeof got - len)) > 0;) {
        len += (size_t)n;
    }
    close(p[0]);
    CHECK(len > 1 && got[len - 1] == '!');
    uint64_t t = 0, end = 0;
    CHECK(len > 1 && last_event(got, len - 1, &t, &end) == TDESC_STREAM_EVENT_STREAM_END);

    /* Errors: a negative descriptor, one that is not open, a pipe without a reader
     * (SIGPIPE is ignored by main: the write fails with EPIPE). */
    w = NULL;
    EXPECT(tdesc_stream_writer_open_fd(-1, &w), TDESC_ERR_INVALID_ARGUMENT);
    CHECK(w == NULL);
    EXPECT(tdesc_stream_writer_open_fd(0, NULL), TDESC_ERR_INVALID_ARGUMENT);
    int q[2];
    CHECK(pipe(q) == 0);
    close(q[0]);
    close(q[1]); /* single-threaded: the numbers stay unused */
    EXPECT(tdesc_stream_writer_open_fd(q[1], &w), TDESC_ERR_IO);
    CHECK(w == NULL && strstr(tdesc_last_error(), "cannot duplicate") != NULL);
    CHECK(pipe(q) == 0);
    close(q[0]);
    EXPECT(tdesc_stream_writer_open_fd(q[1], &w), TDESC_ERR_IO);
    CHECK(w == NULL && strstr(tdesc_last_error(), "cannot write stream bytes 0..24") != NULL);
    CHECK(close(q[1]) == 0);

    /* A non-blocking pipe nobody reads: the 300 kB tensor does not fit (a pipe holds
     * 64 kB), the write would block, and the writer says so (TDESC_ERR_IO) instead of
     * returning TDESC_OK with bytes missing; the writer is spent. What the pipe holds is
     * whole frames' worth of the stream's start, never bytes out of order. */
    CHECK(pipe(q) == 0);
    CHECK(fcntl(q[1], F_SETFL, fcntl(q[1], F_GETFL) | O_NONBLOCK) == 0);
    const void *b1[1] = {datas[1]};
    OK(tdesc_stream_writer_open_fd(q[1], &w));
    EXPECT(tdesc_stream_writer_add(w, names[1], 2, descs[1], b1, 1), TDESC_ERR_IO);
    CHECK(strstr(tdesc_last_error(), "non-blocking") != NULL);
    CHECK(strstr(tdesc_last_error(), "cannot write stream bytes") != NULL);
    EXPECT(tdesc_stream_writer_finish(w), TDESC_ERR_IO);
    tdesc_stream_writer_free(w);
    CHECK(close(q[1]) == 0);
    static uint8_t held[1 << 17];
    size_t got_n = 0;
    for (ssize_t n; (n = read(q[0], held + got_n, sizeof held - got_n)) > 0;) {
        got_n += (size_t)n;
    }
    close(q[0]);
    CHECK(got_n >= 24 && got_n < sizes[1]);
    CHECK(last_event(held, 24, &t, &end) == TDESC_STREAM_EVENT_STREAM_START);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    snprintf(scratch, sizeof scratch, "%s", argv[1]);
    signal(SIGPIPE, SIG_IGN); /* a vanished reader is an error status, not a signal */
    alarm(WATCHDOG_S);
    make_tensors();
    test_callback_writer();
    test_fd_writer();
    producer_and_consumer(OVER_SOCKETPAIR_FD);
    producer_and_consumer(OVER_FIFO_PATH);
    producer_and_consumer(OVER_PIPE_CALLBACK);
    free_tensors();
    printf("live_stream: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
