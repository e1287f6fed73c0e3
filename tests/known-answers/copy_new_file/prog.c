/* copy_file_range into a new file: src is copied to the new file dst, dst is fsynced (its
 * directory is not), then "done" is promised. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    int in = open("src", O_RDONLY);
    int out = open("dst", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    copy_file_range(in, NULL, out, NULL, 6, 0);
    fsync(out);
    write(1, "done\n", 5);
    return 0;
}
