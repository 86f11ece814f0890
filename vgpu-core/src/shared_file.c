/* Files of the shared directory, mapped by every process of the container. Whoever creates one
 * makes it mode 0666 with fchmod, whatever its umask: a root entrypoint may create the files
 * before the application runs as another uid. Creation and initialisation are serialised by
 * flock; a file of the right size is initialised only while blank, so a file another version
 * of the library laid out is refused rather than wiped under the processes using it. */
#include "shared_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARED_MODE 0666

/* Fills in a file no process has initialised yet: all zero (a file of another layout or version,
 * whose magic is not ours, is refused, never overwritten under processes still using it). */
static int init_if_blank(void *map, const char *magic, int (*init)(void *))
{
    static const char blank[8];
    if (memcmp(map, magic, 8) == 0)
        return 0;
    if (memcmp(map, blank, 8) != 0 || init(map) != 0)
        return -1;
    memcpy(map, magic, 8);
    return 0;
}

/* Under the flock: the file made usable by every user of the container whatever the creating
 * process's umask (a root entrypoint may create it before the application runs as another uid),
 * sized, mapped and initialised once. NULL with *problem on failure. */
static void *map_locked(int fd, size_t size, const char *magic, int (*init)(void *),
                        const char **problem)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_uid == geteuid() && (st.st_mode & 0777) != SHARED_MODE &&
                                fchmod(fd, SHARED_MODE) != 0)) {
        *problem = strerror(errno);
        return NULL;
    }
    if (st.st_size != 0 && (size_t)st.st_size != size) {
        *problem = "it has an unknown layout";
        return NULL;
    }
    if (st.st_size == 0 && ftruncate(fd, (off_t)size) != 0) {
        *problem = strerror(errno);
        return NULL;
    }
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        *problem = strerror(errno);
        return NULL;
    }
    if (init_if_blank(map, magic, init) != 0) {
        *problem = "it has an unknown layout";
        munmap(map, size);
        return NULL;
    }
    return map;
}

void *vgpu_map_shared(const char *dir, const char *name, size_t size, const char *magic,
                      int (*init)(void *), int *keep, char *err, size_t errlen)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, SHARED_MODE);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open %s: %s%s", path, strerror(e),
                 e == EACCES ? " (it must be writable by every user of the container)" : "");
        return NULL;
    }
    const char *problem = NULL;
    void *map = NULL;
    if (flock(fd, LOCK_EX) != 0)
        problem = strerror(errno);
    else
        map = map_locked(fd, size, magic, init, &problem);
    flock(fd, LOCK_UN);
    if (!map)
        snprintf(err, errlen, "cannot map %s: %s", path, problem);
    if (map && keep)
        *keep = fd;
    else
        close(fd);
    return map;
}
