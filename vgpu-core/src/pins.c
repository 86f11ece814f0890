/* Whether an exported descriptor is still open anywhere (pins.h), asked of the kernel rather
 * than of /proc/<pid>/fd, which another user's process, another PID namespace (containers
 * sharing a DRA claim) or a descriptor in flight over a UNIX socket would hide.
 *
 * At export, the descriptor's open file description takes an open file description lock on one
 * byte far past any data (a read lock, or a write lock where the file was opened write-only).
 * Every copy of the descriptor (inherited, dup'd, passed over a socket, in flight) shares that
 * description, and the kernel drops the lock exactly when the description's last reference is
 * closed, however its holders exit: the lock lives as long as the descriptor does. The kernel
 * lists every such lock, of every process and PID namespace, in /proc/locks ("OFDLCK", the
 * file's device and inode, the locked range), so a pinned file is open while a lock of it at
 * that byte is listed. Reading it is bounded (at most READ_CAP bytes, or it cannot be told) and
 * allocates nothing: a stack buffer, one line at a time. A list that does not show a lock the
 * caller holds itself (the canary) is not the kernel's whole list (masked, say, by an empty
 * file mounted over it), and cannot tell either. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "pins.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PIN_AT 0x7667707500000000ll /* "vgpu": far past the data of any file it is put on */
#define READ_CAP (8 << 20)          /* /proc/locks read past this: cannot be told */
#define LINE_MAX_LEN 160            /* longer lines are no lock of ours */

int vgpu_pin(int fd)
{
    int mode = fcntl(fd, F_GETFL);
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = mode >= 0 && (mode & O_ACCMODE) == O_WRONLY ? F_WRLCK : F_RDLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = PIN_AT;
    fl.l_len = 1;
    return mode >= 0 && fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -1;
}

static int names(const uint64_t id[2], unsigned int maj, unsigned int min, unsigned long long ino)
{
    return major(id[0]) == maj && minor(id[0]) == min && id[1] == ino;
}

/* Marks the identities a held lock line of ours names ("N: OFDLCK ADVISORY READ -1 MA:MI:INO
 * START END"; a waiter's line, "N: -> ...", holds nothing); 1 if it is a lock on `canary`. */
static int mark(const char *line, const uint64_t (*ids)[2], int n, unsigned char *found,
                const uint64_t canary[2])
{
    unsigned int maj, min;
    unsigned long long ino, start;
    if (sscanf(line, "%*d: OFDLCK %*s %*s %*d %x:%x:%llu %llu", &maj, &min, &ino, &start) != 4)
        return 0;
    for (int i = 0; start == (unsigned long long)PIN_AT && i < n; i++)
        found[i] |= names(ids[i], maj, min, ino);
    return names(canary, maj, min, ino);
}

int vgpu_pins_open(const uint64_t (*ids)[2], int n, unsigned char *found,
                   const uint64_t canary[2])
{
    char buf[4096], line[LINE_MAX_LEN + 1];
    size_t len = 0, total = 0;
    int seen = 0;
    ssize_t got;
    int fd = open("/proc/locks", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while ((got = read(fd, buf, sizeof buf)) > 0 && total <= READ_CAP) {
        total += (size_t)got;
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] != '\n') {
                len += len <= LINE_MAX_LEN; /* a longer line is kept truncated, never parsed */
                if (len <= LINE_MAX_LEN)
                    line[len - 1] = buf[i];
                continue;
            }
            line[len <= LINE_MAX_LEN ? len : 0] = '\0';
            if (len <= LINE_MAX_LEN)
                seen |= mark(line, ids, n, found, canary);
            len = 0;
        }
    }
    close(fd);
    return got < 0 || total > READ_CAP || !seen ? -1 : 0;
}
