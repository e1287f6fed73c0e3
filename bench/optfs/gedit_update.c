/* A gedit-style atomic file update (the seeds' OptFS paper, `001` §7.1): write the new
 * version under a temporary name, fsync it, rename it over the file, print "saved".
 * One binary is the workload and its checker (ALICE contract: exit 0 = consistent).
 *
 *   gedit_update init                 create f with the old version (before recording)
 *   gedit_update save [--durable]     the update; --durable also fsyncs the directory
 *                                     after the rename, so "saved" means the new f is on
 *                                     disk (§7.1: "some applications issue another fsync")
 *   gedit_update check [--durability] CRASH_DIR STDOUT_FILE
 *       f must be the old or the new version, whole (atomic update); with --durability,
 *       the new one if "saved" was printed.
 *
 * The new version is 6,000 bytes (two 4 KiB blocks), the old one a short line. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OLD "old version\n"
#define NEW_LEN 6000

static void new_version(char *buf) {
    for (int i = 0; i < NEW_LEN; i++)
        buf[i] = (i % 60 == 59) ? '\n' : (char)('a' + (i / 60) % 26);
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) die("write");
        p += w;
        n -= (size_t)w;
    }
}

static int init(void) {
    int fd = open("f", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("open f");
    write_all(fd, OLD, strlen(OLD));
    if (fsync(fd) != 0) die("fsync f");
    close(fd);
    return 0;
}

static int save(int durable) {
    static char buf[NEW_LEN];
    new_version(buf);
    int fd = open("f.tmp", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("open f.tmp");
    write_all(fd, buf, NEW_LEN);
    if (fsync(fd) != 0) die("fsync f.tmp");
    close(fd);
    if (rename("f.tmp", "f") != 0) die("rename");
    if (durable) {
        int d = open(".", O_RDONLY | O_DIRECTORY);
        if (d < 0 || fsync(d) != 0) die("fsync .");
        close(d);
    }
    printf("saved\n");
    fflush(stdout);
    return 0;
}

static int bad(const char *fmt, const char *detail) {
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
    return 1;
}

static int check(int durability, const char *dir, const char *out) {
    static char want_new[NEW_LEN], got[NEW_LEN + 1];
    new_version(want_new);
    char path[4096];
    snprintf(path, sizeof path, "%s/f", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return bad("f is missing%s", "");
    size_t n = fread(got, 1, sizeof got, f);
    fclose(f);
    int is_old = n == strlen(OLD) && memcmp(got, OLD, n) == 0;
    int is_new = n == NEW_LEN && memcmp(got, want_new, n) == 0;
    if (!is_old && !is_new) {
        char d[64];
        snprintf(d, sizeof d, "%zu bytes", n);
        return bad("f is neither the old nor the new version (%s)", d);
    }
    if (durability && is_old) {
        FILE *o = fopen(out, "r");
        char line[64];
        while (o && fgets(line, sizeof line, o))
            if (strcmp(line, "saved\n") == 0) {
                fclose(o);
                return bad("\"saved\" was printed but f is the old version%s", "");
            }
        if (o) fclose(o);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "init") == 0) return init();
    if (argc >= 2 && strcmp(argv[1], "save") == 0) return save(argc >= 3 && strcmp(argv[2], "--durable") == 0);
    if (argc >= 4 && strcmp(argv[1], "check") == 0) {
        int durability = strcmp(argv[2], "--durability") == 0;
        if (argc == 4 + durability) return check(durability, argv[2 + durability], argv[3 + durability]);
    }
    fprintf(stderr, "usage: gedit_update init | save [--durable] | check [--durability] CRASH_DIR STDOUT_FILE\n");
    return 2;
}
