/* Strict parser of the `limits` file: one format version, fixed field order, bounded numbers. A
 * hand-written parser keeps the library free of locale and allocation surprises in a hook. */
#include "limits.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define HEADER "vgpu-limits 1\n"

typedef struct {
    const char *p;
    const char *end;
    int line;
} cursor;

static int fail(char *err, size_t errlen, int line, const char *what)
{
    snprintf(err, errlen, "line %d: %s", line, what);
    return -1;
}

/* Reads a decimal number without sign or leading zeros, at most max. */
static int read_number(cursor *c, uint64_t max, uint64_t *out)
{
    const char *start = c->p;
    uint64_t value = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
        uint64_t digit = (uint64_t)(*c->p - '0');
        if (value > (max - digit) / 10)
            return -1;
        value = value * 10 + digit;
        c->p++;
    }
    if (c->p == start || (*start == '0' && c->p - start > 1))
        return -1;
    *out = value;
    return 0;
}

static int expect(cursor *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return -1;
    c->p += n;
    return 0;
}

static int is_uuid_hex(const char *s)
{
    for (int i = 0; i < VGPU_UUID_HEX_LEN; i++) {
        int dash = (i == 8 || i == 13 || i == 18 || i == 23);
        if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
            return 0;
    }
    return 1;
}

static int read_uuid(cursor *c, char *hex)
{
    if (c->end - c->p < 4 + VGPU_UUID_HEX_LEN)
        return -1;
    if (memcmp(c->p, "GPU-", 4) != 0 && memcmp(c->p, "MIG-", 4) != 0)
        return -1;
    if (!is_uuid_hex(c->p + 4))
        return -1;
    for (int i = 0; i < VGPU_UUID_HEX_LEN; i++)
        hex[i] = (char)tolower((unsigned char)c->p[4 + i]);
    hex[VGPU_UUID_HEX_LEN] = '\0';
    c->p += 4 + VGPU_UUID_HEX_LEN;
    return 0;
}

static int read_field(cursor *c, const char *name, uint64_t min, uint64_t max, uint64_t *out)
{
    if (expect(c, " ") || expect(c, name) || expect(c, "=") || read_number(c, max, out))
        return -1;
    return *out < min ? -1 : 0;
}

static int read_device(cursor *c, vgpu_limit *d, char *err, size_t errlen)
{
    uint64_t memory, cores, limit, allowance, scale = VGPU_SCALE_NEUTRAL;
    if (expect(c, "device "))
        return fail(err, errlen, c->line, "expected `device <UUID> memory=.. cores=.. limit=.. allowance=..`");
    if (read_uuid(c, d->uuid))
        return fail(err, errlen, c->line, "the UUID must be GPU- or MIG- followed by 36 characters");
    if (read_field(c, "memory", 1, INT64_MAX, &memory)) /* the agent's bound too: sums stay exact */
        return fail(err, errlen, c->line, "memory must be a byte count with 1 <= memory <= 2^63-1");
    if (read_field(c, "cores", 1, 100, &cores) || read_field(c, "limit", cores, 100, &limit))
        return fail(err, errlen, c->line, "cores and limit must satisfy 1 <= cores <= limit <= 100");
    if (read_field(c, "allowance", cores, limit, &allowance))
        return fail(err, errlen, c->line, "allowance must satisfy cores <= allowance <= limit");
    if (c->p < c->end && *c->p == ' ' && read_field(c, "scale", 1000, VGPU_SCALE_MAX, &scale))
        return fail(err, errlen, c->line, "scale (optional) must satisfy 1000 <= scale <= 8000");
    if (expect(c, "\n"))
        return fail(err, errlen, c->line, "unexpected data at the end of the line");
    d->memory = memory;
    d->cores = (int)cores;
    d->limit = (int)limit;
    d->allowance = (int)allowance;
    d->scale = (int)scale;
    return 0;
}

int vgpu_limits_find(const vgpu_limits *limits, const char *hex)
{
    for (int i = 0; i < limits->count; i++)
        if (strncasecmp(limits->dev[i].uuid, hex, VGPU_UUID_HEX_LEN) == 0)
            return i;
    return -1;
}

int vgpu_limits_parse(const char *text, size_t len, vgpu_limits *out, char *err, size_t errlen)
{
    cursor c = {text, text + len, 1};
    memset(out, 0, sizeof *out);
    if (len > VGPU_LIMITS_MAX_BYTES)
        return fail(err, errlen, 0, "the file is larger than 4096 bytes");
    if (expect(&c, HEADER))
        return fail(err, errlen, 1, "the first line must be exactly `vgpu-limits 1`");
    while (c.p < c.end) {
        c.line++;
        if (out->count == VGPU_MAX_DEVICES)
            return fail(err, errlen, c.line, "more than 16 device lines");
        vgpu_limit *d = &out->dev[out->count];
        if (read_device(&c, d, err, errlen))
            return -1;
        if (vgpu_limits_find(out, d->uuid) >= 0)
            return fail(err, errlen, c.line, "duplicate UUID");
        out->count++;
    }
    if (out->count == 0)
        return fail(err, errlen, 2, "no device lines");
    return 0;
}

int vgpu_limits_load(const char *path, vgpu_limits *out, char *err, size_t errlen)
{
    char buf[VGPU_LIMITS_MAX_BYTES + 1];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "cannot read: %s", strerror(errno));
            close(fd);
            return -1;
        }
        if (n == 0 || (len += (size_t)n) == sizeof buf)
            break;
    }
    close(fd);
    return vgpu_limits_parse(buf, len, out, err, errlen);
}
