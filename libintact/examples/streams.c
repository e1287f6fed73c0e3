/* streams: a small command-line client of libintact (docs/fs-api.md).
 *
 *   streams id NAME                          print the stream id of NAME
 *   streams get PATH                         print the caller's stream and flags
 *   streams sync PATH                        streamsync the caller's stream
 *   streams run PATH NAME [-i] -- CMD ARGS   run CMD in stream NAME (-i: IGNORE_FSYNC)
 *
 * PATH is any file or directory of an intactfs mount. `run` is what `intact fs exec`
 * does: the stream belongs to this process, exec keeps the process, and the command's
 * children inherit it.
 */
#define _POSIX_C_SOURCE 200809L
#include <intact.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int usage(void) {
    fprintf(stderr,
            "usage: streams id NAME\n"
            "       streams get PATH\n"
            "       streams sync PATH\n"
            "       streams run PATH NAME [-i] -- CMD [ARGS...]\n");
    return 2;
}

static int fail(const char *what, const char *path) {
    fprintf(stderr, "streams: %s %s: %s%s\n", what, path, strerror(errno),
            errno == ENOTTY ? " (not on an intactfs mount)" : "");
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return usage();
    const char *cmd = argv[1];
    if (strcmp(cmd, "id") == 0 && argc == 3) {
        printf("0x%016" PRIx64 "\n", intact_stream_id(argv[2]));
        return 0;
    }
    if (strcmp(cmd, "get") == 0 && argc == 3) {
        uint64_t id;
        uint32_t flags;
        if (intact_getstream_path(argv[2], &id, &flags) < 0)
            return fail("getstream", argv[2]);
        printf("stream 0x%016" PRIx64 "%s%s\n", id, id == INTACT_INIT_STREAM ? " (init)" : "",
               flags & INTACT_IGNORE_FSYNC ? " IGNORE_FSYNC" : "");
        return 0;
    }
    if (strcmp(cmd, "sync") == 0 && argc == 3) {
        if (intact_streamsync_path(argv[2]) < 0)
            return fail("streamsync", argv[2]);
        return 0;
    }
    if (strcmp(cmd, "run") == 0 && argc >= 6) {
        const char *path = argv[2], *name = argv[3];
        uint32_t flags = 0;
        int i = 4;
        if (strcmp(argv[i], "-i") == 0) {
            flags |= INTACT_IGNORE_FSYNC;
            i++;
        }
        if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc)
            return usage();
        if (intact_setstream_path(path, name, flags) < 0)
            return fail("setstream", path);
        execvp(argv[i + 1], &argv[i + 1]);
        fprintf(stderr, "streams: %s: %s\n", argv[i + 1], strerror(errno));
        return 127;
    }
    return usage();
}
