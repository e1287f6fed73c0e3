/* Two names of one file that must appear together (a and b, e.g. an index and its
 * mirror): linked one after the other, nothing synced, nothing printed. */
#include <unistd.h>

int main(void) {
    link("data", "a");
    link("data", "b");
    return 0;
}
