/*
 * vgpu-cdi-hook: the OCI `createRuntime` hook the DRA driver writes into each claim's CDI spec.
 *
 *   vgpu-cdi-hook SOCKET CLAIM_UID [TIMEOUT_MS]
 *
 * Why it exists: a pod joining a shared claim that is already prepared gets no
 * NodePrepareResources call, so nothing made the runtime wait for the driver's memory limit on
 * that pod's cgroup. The runtime runs this hook before each container and waits for it.
 *
 * What the runtime gives it (OCI runtime spec, config.md "POSIX-platform Hooks"): the container's
 * state JSON on stdin; `createRuntime` hooks run in the runtime namespace after the runtime
 * environment is created and before pivot_root, and a hook that fails makes the create
 * operation fail. CDI (cncf-tags/container-device-interface SPEC.md, `containerEdits.hooks`)
 * carries `path`, `args` (execv's argv) and `timeout` into that OCI hook.
 *
 * What it does: reads the state (at most VGPU_HOOK_MAX_STATE bytes), sends "<claim uid>\n"
 * followed by the state to the driver's unix socket, half-closes, and waits for the answer
 * until TIMEOUT_MS (default 5000) has passed since it started. It exits 0 only when the answer
 * is exactly "ok"; otherwise it prints the driver's answer or its own cause on stderr and exits
 * 1, so a driver that is down or slow keeps the container from starting (fail closed): the
 * kubelet reports the failed creation on the pod and retries with back-off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define VGPU_HOOK_MAX_STATE (64 * 1024) /* the driver refuses larger requests too */
#define VGPU_HOOK_MAX_ANSWER 4096
#define VGPU_HOOK_MAX_UID 64
#define VGPU_HOOK_DEFAULT_MS 5000L
#define VGPU_HOOK_MAX_MS 60000L

static char state[VGPU_HOOK_MAX_STATE + 1];
static char answer[VGPU_HOOK_MAX_ANSWER + 1];

static int fail(const char *what, const char *detail) {
    fprintf(stderr, "vgpu-cdi-hook: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Wait until fd is ready for `events` or the deadline passes: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long deadline) {
    for (;;) {
        long left = deadline - now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events, .revents = 0};
        int n = poll(&p, 1, (int)left);
        if (n > 0) return 1;
        if (n == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

/* A claim UID as Kubernetes makes them: hex digits and dashes, nothing else. */
static int valid_uid(const char *uid) {
    size_t n = strlen(uid);
    if (n == 0 || n > VGPU_HOOK_MAX_UID) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = uid[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-')) return 0;
    }
    return 1;
}

static long parse_timeout(const char *text) {
    char *end = NULL;
    errno = 0;
    long ms = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || ms <= 0 || ms > VGPU_HOOK_MAX_MS) return -1;
    return ms;
}

/* Read all of stdin into `state` before the deadline: its length, or -1 with `*why` set. */
static long read_state(long deadline, const char **why) {
    size_t got = 0;
    for (;;) {
        int ready = wait_fd(STDIN_FILENO, POLLIN, deadline);
        if (ready <= 0) {
            *why = ready == 0 ? "timed out reading the container state on stdin"
                              : "cannot wait for stdin";
            return -1;
        }
        ssize_t n = read(STDIN_FILENO, state + got, sizeof state - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            *why = "cannot read the container state on stdin";
            return -1;
        }
        if (n == 0) return (long)got;
        got += (size_t)n;
        if (got > VGPU_HOOK_MAX_STATE) {
            *why = "the container state on stdin is larger than 64 KiB";
            return -1;
        }
    }
}

static int send_all(int fd, const char *data, size_t len, long deadline) {
    while (len > 0) {
        if (wait_fd(fd, POLLOUT, deadline) != 1) return -1;
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Read the answer until the driver closes: its length, or -1 (timeout or error). */
static long read_answer(int fd, long deadline) {
    size_t got = 0;
    for (;;) {
        if (wait_fd(fd, POLLIN, deadline) != 1) return -1;
        ssize_t n = recv(fd, answer + got, VGPU_HOOK_MAX_ANSWER - got, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) return -1;
        if (n == 0 || got + (size_t)n == VGPU_HOOK_MAX_ANSWER) {
            got += (size_t)n;
            answer[got] = '\0';
            return (long)got;
        }
        got += (size_t)n;
    }
}

static int connect_to(const char *path, const char **why) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path) {
        *why = "the socket path is too long";
        return -1;
    }
    memcpy(addr.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) return fd;
    /* A unix socket's connect does not complete later: a full backlog is an answer too. */
    *why = errno == EAGAIN ? "its socket's backlog is full" : strerror(errno);
    close(fd);
    return -1;
}

int main(int argc, char **argv) {
    long start = now_ms();
    if (argc != 3 && argc != 4)
        return fail("usage: vgpu-cdi-hook SOCKET CLAIM_UID [TIMEOUT_MS]", NULL);
    if (!valid_uid(argv[2])) return fail("not a claim UID", argv[2]);
    long timeout = argc == 4 ? parse_timeout(argv[3]) : VGPU_HOOK_DEFAULT_MS;
    if (timeout < 0) return fail("TIMEOUT_MS must be 1 to 60000", argv[3]);
    long deadline = start + timeout;
    const char *why = NULL;
    long len = read_state(deadline, &why);
    if (len < 0) return fail(why, NULL);
    int fd = connect_to(argv[1], &why);
    if (fd < 0) {
        fprintf(stderr, "vgpu-cdi-hook: cannot reach the vgpu DRA driver at %s (%s), so the "
                        "driver's memory limit of this pod cannot be set\n", argv[1], why);
        return 1;
    }
    char header[VGPU_HOOK_MAX_UID + 2];
    int hlen = snprintf(header, sizeof header, "%s\n", argv[2]);
    int sent = send_all(fd, header, (size_t)hlen, deadline) == 0 &&
               send_all(fd, state, (size_t)len, deadline) == 0 && shutdown(fd, SHUT_WR) == 0;
    long got = read_answer(fd, deadline); /* a driver that refused early ("busy") said why */
    close(fd);
    if (!sent && got <= 0)
        return fail("cannot send the container state to the vgpu DRA driver", argv[1]);
    if (!sent) {
        fprintf(stderr, "vgpu-cdi-hook: %s\n", answer);
        return 1;
    }
    if (got < 0) {
        fprintf(stderr, "vgpu-cdi-hook: no answer from the vgpu DRA driver at %s within %ld ms\n",
                argv[1], timeout);
        return 1;
    }
    if (strcmp(answer, "ok") == 0) return 0;
    fprintf(stderr, "vgpu-cdi-hook: %s\n", got > 0 ? answer : "the driver closed without an answer");
    return 1;
}
