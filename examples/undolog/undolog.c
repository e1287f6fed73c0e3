/* undolog: the undo-logging DBMS of thesis 004, Figures 2.1 and 2.2, as a workload and a
 * checker for intact.
 *
 * The "database" is one file, dbfile (12288 bytes = three 4-KiB blocks). A transaction
 * replaces bytes [1000, 9000) -- they span all three blocks -- with new contents. Undo
 * logging: first back up the bytes about to change into a separate file, log; then
 * overwrite them in dbfile; then delete log. At startup the DBMS looks for log: if it is
 * there and complete, a crash interrupted a transaction, and the old bytes are written
 * back (rolled back).
 *
 *   undolog init                      create ./dbfile (old contents), fsync it and "."
 *   undolog update [--measures LIST]  one transaction in "."; prints "committed" at the end
 *   undolog recover DIR               startup recovery (roll back from DIR/log if valid)
 *   undolog check CRASH_DIR STDOUT_FILE
 *                                     intact checker: recover, then verify atomicity and
 *                                     durability; exit 0 = consistent, 1 = not (reason on
 *                                     stderr), 2 = usage error
 *
 * Contents: old byte i = 'a' + i % 26, new byte i = 'A' + i % 26 (i = offset in dbfile).
 *
 * Log record (one record, written with a single write() call):
 *   header   33 bytes, ASCII: "UNDOLOG1 F OOOOOOOOOO SSSSSSSSSS\n"
 *              F = 'C' (the record carries a checksum trailer) or 'N' (it does not),
 *              O = offset in dbfile, S = size of the backed-up bytes (10 decimal digits)
 *   data     S bytes: the old contents of dbfile[O, O+S)
 *   trailer  15 bytes, only with F = 'C': "crc32=XXXXXXXX\n", CRC-32 (IEEE, as zlib's
 *            crc32) of header and data, 8 lower-case hex digits
 * A record is valid (complete) iff the header parses, the file length is exactly
 * 33 + S (+ 15 with 'C'), O + S is within dbfile's current size, S <= 64 MiB, and with
 * 'C' the checksum matches. Anything else is "invalid": the transaction cannot have touched
 * dbfile yet (if the protocol is correct), so recovery just deletes the log.
 *
 * Measures: the extra steps of Figure 2.2 over Figure 2.1. The figure's body is missing
 * from our copy of the thesis; these are reconstructed from its caption and the prose of
 * section 2.2 (see README.md for which file systems need which measure):
 *   checksum          the record carries a checksum. Protects against garbage (or zeros)
 *                     in the appended part of log after a crash (ext2, ext3/ext4 in
 *                     data=writeback mode): without it, recovery "restores" garbage.
 *   fsync-log         fsync(log) before the dbfile write. Protects the ordering of log data
 *                     before the dbfile overwrite: otherwise dbfile can be (partly) updated
 *                     on disk while the backup in log is still missing or incomplete.
 *   fsync-dir-log     fsync(".") after creating and writing log, before the dbfile write.
 *                     The directory entry of log is separate from its data: without this
 *                     the new name "log" may be lost while dbfile is already modified.
 *   fsync-db          fsync(dbfile) before unlink(log). Otherwise the unlink may reach the
 *                     disk before the dbfile write (ext2, ext4, xfs, btrfs): after a crash
 *                     the log is gone and dbfile is partly updated.
 *   fsync-dir-unlink  fsync(".") after unlink(log), before printing "committed". Durability:
 *                     without it the unlink may be lost after "committed" was printed, and
 *                     recovery then rolls the committed transaction back.
 * --measures all (the default) = Figure 2.2; --measures none = Figure 2.1;
 * --measures a,b,c = just those; --measures all-but=a[,b] = all except those.
 *
 * Test hook (not part of the protocol): --die-after log|db makes update _exit(3) right
 * after the log write (and its fsyncs) or after the dbfile write (and its fsync), leaving
 * the files as a killed process would (a process crash, not a system crash).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DB_NAME "dbfile"
#define LOG_NAME "log"
#define DB_SIZE 12288
#define UPD_OFF 1000
#define UPD_LEN 8000
#define HDR_LEN 33
#define TRL_LEN 15
#define MAX_REC (64u << 20)

enum {
    M_CHECKSUM = 1 << 0,
    M_FSYNC_LOG = 1 << 1,
    M_FSYNC_DIR_LOG = 1 << 2,
    M_FSYNC_DB = 1 << 3,
    M_FSYNC_DIR_UNLINK = 1 << 4,
    M_ALL = (1 << 5) - 1,
};
static const struct { const char *name; int bit; } measures[] = {
    {"checksum", M_CHECKSUM},         {"fsync-log", M_FSYNC_LOG},
    {"fsync-dir-log", M_FSYNC_DIR_LOG}, {"fsync-db", M_FSYNC_DB},
    {"fsync-dir-unlink", M_FSYNC_DIR_UNLINK},
};
#define N_MEASURES (sizeof measures / sizeof measures[0])

static unsigned char old_byte(long i) { return (unsigned char)('a' + i % 26); }
static unsigned char new_byte(long i) { return (unsigned char)('A' + i % 26); }

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    crc = ~crc;
    while (n--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void die(const char *what) {
    fprintf(stderr, "undolog: %s: %s\n", what, strerror(errno));
    exit(1);
}

__attribute__((noreturn)) static void usage(void) {
    fprintf(stderr,
            "usage: undolog init\n"
            "       undolog update [--measures all|none|NAME,...|all-but=NAME,...] [--die-after log|db]\n"
            "       undolog recover DIR\n"
            "       undolog check CRASH_DIR STDOUT_FILE\n"
            "measures: checksum fsync-log fsync-dir-log fsync-db fsync-dir-unlink\n");
    exit(2);
}

/* ------------------------------------------------------------------ init */

static int cmd_init(void) {
    unsigned char buf[DB_SIZE];
    for (long i = 0; i < DB_SIZE; i++) buf[i] = old_byte(i);
    if (unlink(LOG_NAME) < 0 && errno != ENOENT) die("unlink log");
    int db = open(DB_NAME, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (db < 0) die("open dbfile");
    if (write(db, buf, DB_SIZE) != DB_SIZE) die("write dbfile");
    if (fsync(db) < 0) die("fsync dbfile");
    close(db);
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    if (dir < 0 || fsync(dir) < 0) die("fsync .");
    close(dir);
    return 0;
}

/* ---------------------------------------------------------------- update */

static int parse_measures(const char *s) {
    if (strcmp(s, "all") == 0) return M_ALL;
    if (strcmp(s, "none") == 0) return 0;
    int but = strncmp(s, "all-but=", 8) == 0;
    if (but) s += 8;
    int set = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t k = 0;
        while (k < N_MEASURES && strcmp(tok, measures[k].name) != 0) k++;
        if (k == N_MEASURES) {
            fprintf(stderr, "undolog: unknown measure '%s'\n", tok);
            usage();
        }
        set |= measures[k].bit;
    }
    free(copy);
    if (!set) {
        fprintf(stderr, "undolog: empty measure list\n");
        usage();
    }
    return but ? M_ALL & ~set : set;
}

static int cmd_update(int argc, char **argv) {
    int m = M_ALL;
    const char *die_after = "";
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--measures") == 0 && i + 1 < argc) m = parse_measures(argv[++i]);
        else if (strncmp(argv[i], "--measures=", 11) == 0) m = parse_measures(argv[i] + 11);
        else if (strcmp(argv[i], "--die-after") == 0 && i + 1 < argc) die_after = argv[++i];
        else usage();
    }
    if (*die_after && strcmp(die_after, "log") != 0 && strcmp(die_after, "db") != 0) usage();

    int db = open(DB_NAME, O_RDWR);
    if (db < 0) die("open dbfile (run 'undolog init' first)");
    struct stat st;
    if (fstat(db, &st) < 0) die("stat dbfile");
    if (st.st_size != DB_SIZE) {
        fprintf(stderr, "undolog: dbfile is %lld bytes, expected %d\n", (long long)st.st_size, DB_SIZE);
        return 1;
    }

    /* The record: header, the old bytes (backup), optional checksum trailer. */
    static unsigned char rec[HDR_LEN + UPD_LEN + TRL_LEN];
    int csum = (m & M_CHECKSUM) != 0;
    snprintf((char *)rec, HDR_LEN + 1, "UNDOLOG1 %c %010d %010d\n", csum ? 'C' : 'N', UPD_OFF, UPD_LEN);
    if (pread(db, rec + HDR_LEN, UPD_LEN, UPD_OFF) != UPD_LEN) die("read dbfile");
    size_t len = HDR_LEN + UPD_LEN;
    if (csum) {
        char trl[TRL_LEN + 1];
        snprintf(trl, sizeof trl, "crc32=%08x\n", (unsigned)crc32_update(0, rec, len));
        memcpy(rec + len, trl, TRL_LEN);
        len += TRL_LEN;
    }
    unsigned char data[UPD_LEN];
    for (long i = 0; i < UPD_LEN; i++) data[i] = new_byte(UPD_OFF + i);
    int dir = -1;  /* ".", for the directory fsyncs */
    if ((m & (M_FSYNC_DIR_LOG | M_FSYNC_DIR_UNLINK)) && (dir = open(".", O_RDONLY | O_DIRECTORY)) < 0)
        die("open .");

    /* creat(log); O_EXCL: never clobber the log of an interrupted transaction. */
    int log = open(LOG_NAME, O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (log < 0) {
        if (errno == EEXIST) {
            fprintf(stderr, "undolog: ./log exists: an earlier transaction was interrupted; "
                            "run 'undolog recover .' first\n");
            return 1;
        }
        die("create log");
    }
    if (write(log, rec, len) != (ssize_t)len) die("write log");   /* the backup (checksum) */
    if ((m & M_FSYNC_LOG) && fsync(log) < 0) die("fsync log");     /* fsync-log */
    if ((m & M_FSYNC_DIR_LOG) && fsync(dir) < 0) die("fsync .");   /* fsync-dir-log */
    close(log);
    if (strcmp(die_after, "log") == 0) _exit(3);

    if (pwrite(db, data, UPD_LEN, UPD_OFF) != UPD_LEN) die("write dbfile"); /* the update */
    if ((m & M_FSYNC_DB) && fsync(db) < 0) die("fsync dbfile");    /* fsync-db */
    close(db);
    if (strcmp(die_after, "db") == 0) _exit(3);

    if (unlink(LOG_NAME) < 0) die("unlink log");                   /* commit */
    if ((m & M_FSYNC_DIR_UNLINK) && fsync(dir) < 0) die("fsync ."); /* fsync-dir-unlink */
    if (dir >= 0) close(dir);

    static const char msg[] = "committed\n";
    if (write(1, msg, sizeof msg - 1) != sizeof msg - 1) die("write stdout");
    return 0;
}

/* -------------------------------------------------------------- recovery */

static int digits(const unsigned char *p, int n, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

static int read_full(int fd, unsigned char *buf, size_t n, off_t off) {
    while (n) {
        ssize_t r = pread(fd, buf, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        buf += r, n -= (size_t)r, off += r;
    }
    return 1;
}

/* Roll back from DIR/log if it holds a valid record, then delete the log. Returns 0 on
 * success (note says what happened), -1 on an error (note says which). */
static int recover(const char *dir, char *note, size_t notesz) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0) {
        snprintf(note, notesz, "cannot open directory %s: %s", dir, strerror(errno));
        return -1;
    }
    int ret = -1;
    unsigned char *data = NULL;
    int db = -1, log = openat(dfd, LOG_NAME, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
    if (log < 0) {
        if (errno == ENOENT) {
            snprintf(note, notesz, "no log");
            ret = 0;
        } else
            snprintf(note, notesz, "cannot open log: %s", strerror(errno));
        goto out;
    }
    struct stat st;
    if (fstat(log, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(note, notesz, "log is not a regular file");
        goto out;
    }

    /* Validate the record; on the first problem, fall through to deleting the log. */
    const char *invalid = NULL;
    char why[160];
    unsigned char hdr[HDR_LEN];
    uint64_t off = 0, size = 0, want = 0;
    int csum = 0;
    if (st.st_size < HDR_LEN) {
        snprintf(why, sizeof why, "log is %lld bytes, shorter than a header", (long long)st.st_size);
        invalid = why;
    } else if (!read_full(log, hdr, HDR_LEN, 0)) {
        snprintf(note, notesz, "cannot read log: %s", strerror(errno));
        goto out;
    } else if (memcmp(hdr, "UNDOLOG1 ", 9) != 0 || (hdr[9] != 'C' && hdr[9] != 'N') ||
               hdr[10] != ' ' || !digits(hdr + 11, 10, &off) || hdr[21] != ' ' ||
               !digits(hdr + 22, 10, &size) || hdr[32] != '\n') {
        invalid = "log header is malformed";
    } else {
        csum = hdr[9] == 'C';
        want = HDR_LEN + size + (csum ? TRL_LEN : 0);
        if ((uint64_t)st.st_size != want) {
            snprintf(why, sizeof why, "log is %lld bytes, its size field implies %llu",
                     (long long)st.st_size, (unsigned long long)want);
            invalid = why;
        } else if (size > MAX_REC) {
            invalid = "log record is larger than 64 MiB";
        }
    }
    if (!invalid) {
        db = openat(dfd, DB_NAME, O_RDWR | O_NONBLOCK | O_NOFOLLOW);
        struct stat dst;
        if (db < 0 || fstat(db, &dst) < 0 || !S_ISREG(dst.st_mode)) {
            /* A valid backup but nothing to restore it into: keep the log. */
            snprintf(note, notesz, "log is valid but dbfile cannot be opened: %s",
                     db < 0 ? strerror(errno) : "not a regular file");
            goto out;
        }
        if (off + size > (uint64_t)dst.st_size) {
            snprintf(why, sizeof why, "log record [%llu, +%llu) lies beyond the end of dbfile",
                     (unsigned long long)off, (unsigned long long)size);
            invalid = why;
        }
    }
    if (!invalid) {
        data = malloc(size + HDR_LEN + 1);
        if (!data) {
            snprintf(note, notesz, "out of memory");
            goto out;
        }
        memcpy(data, hdr, HDR_LEN);
        if (!read_full(log, data + HDR_LEN, size, HDR_LEN)) {
            snprintf(note, notesz, "cannot read log: %s", strerror(errno));
            goto out;
        }
        if (csum) {
            unsigned char trl[TRL_LEN + 1];
            if (!read_full(log, trl, TRL_LEN, (off_t)(HDR_LEN + size))) {
                snprintf(note, notesz, "cannot read log: %s", strerror(errno));
                goto out;
            }
            trl[TRL_LEN] = 0;
            char expect[TRL_LEN + 1];
            snprintf(expect, sizeof expect, "crc32=%08x\n",
                     (unsigned)crc32_update(0, data, HDR_LEN + size));
            if (memcmp(trl, expect, TRL_LEN) != 0) invalid = "log checksum does not match";
        }
    }
    if (!invalid) {
        const unsigned char *p = data + HDR_LEN;
        uint64_t n = size, o = off;
        while (n) {
            ssize_t w = pwrite(db, p, n, (off_t)o);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                snprintf(note, notesz, "cannot write dbfile: %s", strerror(errno));
                goto out;
            }
            p += w, n -= (uint64_t)w, o += (uint64_t)w;
        }
        if (fsync(db) < 0) {
            snprintf(note, notesz, "cannot fsync dbfile: %s", strerror(errno));
            goto out;
        }
        snprintf(note, notesz, "rolled back %llu bytes at offset %llu from a valid log",
                 (unsigned long long)size, (unsigned long long)off);
    } else {
        snprintf(note, notesz, "deleted an invalid log (%s)", invalid);
    }
    if (unlinkat(dfd, LOG_NAME, 0) < 0) {
        snprintf(note, notesz, "cannot delete log: %s", strerror(errno));
        goto out;
    }
    if (fsync(dfd) < 0) {
        snprintf(note, notesz, "cannot fsync %s: %s", dir, strerror(errno));
        goto out;
    }
    ret = 0;
out:
    free(data);
    if (db >= 0) close(db);
    if (log >= 0) close(log);
    close(dfd);
    return ret;
}

static int cmd_recover(int argc, char **argv) {
    if (argc != 1) usage();
    char note[512];
    int r = recover(argv[0], note, sizeof note);
    fprintf(stderr, "undolog recover: %s\n", note);
    return r < 0 ? 1 : 0;
}

/* --------------------------------------------------------------- checker */

static int fail(const char *note, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " [recovery: %s]\n", note);
    return 1;
}

static int printed_committed(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return 0;  /* no output file: nothing was printed */
    static char buf[1 << 16];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 && memmem(buf, (size_t)n, "committed", 9) != NULL;
}

static int cmd_check(int argc, char **argv) {
    if (argc != 2) usage();
    const char *dir = argv[0];
    int committed = printed_committed(argv[1]);

    char note[512];
    if (recover(dir, note, sizeof note) < 0) {
        fprintf(stderr, "recovery failed: %s\n", note);
        return 1;
    }

    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, DB_NAME);
    int db = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
    if (db < 0) return fail(note, "dbfile is missing (%s)", strerror(errno));
    struct stat st;
    if (fstat(db, &st) < 0 || !S_ISREG(st.st_mode)) return fail(note, "dbfile is not a regular file");
    if (st.st_size != DB_SIZE)
        return fail(note, "dbfile is %lld bytes, expected %d", (long long)st.st_size, DB_SIZE);
    unsigned char buf[DB_SIZE];
    int ok = read_full(db, buf, DB_SIZE, 0);
    close(db);
    if (!ok) return fail(note, "cannot read dbfile");

    long first_old = -1, first_new = -1;
    for (long i = 0; i < DB_SIZE; i++) {
        int in = i >= UPD_OFF && i < UPD_OFF + UPD_LEN;
        if (buf[i] == old_byte(i)) {
            if (in && first_old < 0) first_old = i;
        } else if (in && buf[i] == new_byte(i)) {
            if (first_new < 0) first_new = i;
        } else if (in) {
            return fail(note, "dbfile byte %ld (in the updated region [%d,%d)) is neither old "
                        "nor new: 0x%02x", i, UPD_OFF, UPD_OFF + UPD_LEN, buf[i]);
        } else {
            return fail(note, "dbfile byte %ld (outside the updated region [%d,%d)) changed: "
                        "0x%02x, expected 0x%02x", i, UPD_OFF, UPD_OFF + UPD_LEN, buf[i], old_byte(i));
        }
    }
    if (first_old >= 0 && first_new >= 0)
        return fail(note, "dbfile region [%d,%d) is a mix of old and new bytes (first new at "
                    "%ld, first old at %ld)", UPD_OFF, UPD_OFF + UPD_LEN, first_new, first_old);
    if (committed && first_new < 0)
        return fail(note, "'committed' was printed but dbfile region [%d,%d) holds the old "
                    "bytes (the transaction is not durable)", UPD_OFF, UPD_OFF + UPD_LEN);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *cmd = argv[1];
    if (strcmp(cmd, "init") == 0 && argc == 2) return cmd_init();
    if (strcmp(cmd, "update") == 0) return cmd_update(argc - 2, argv + 2);
    if (strcmp(cmd, "recover") == 0) return cmd_recover(argc - 2, argv + 2);
    if (strcmp(cmd, "check") == 0) return cmd_check(argc - 2, argv + 2);
    usage();
}
