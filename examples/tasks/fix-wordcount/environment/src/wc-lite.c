#include <stdio.h>
#include <ctype.h>

int main(void) {
    long lines = 0, words = 0, bytes = 0;
    int c, in_word = 0;
    while ((c = getchar()) != EOF) {
        bytes++;
        if (c == '\n') lines++;
        if (c == ' ' || c == '\n') {
            if (in_word) words++;
            in_word = 0;
        } else {
            in_word = 1;
        }
    }
    printf("%ld %ld %ld\n", lines, words, bytes);
    return 0;
}
