/* The unit tests' one assertion: CHECK(condition, printf-style explanation) counts the
 * check, and prints the line, the condition and the explanation when it fails;
 * CHECK_SUMMARY() prints "N checks, M failed" and is the exit status. */
#ifndef LINKEM_CHECK_H
#define LINKEM_CHECK_H

#include <stdio.h>

static int checks, failures;

#define CHECK(cond, ...) do {                                                   \
	checks++;                                                               \
	if (!(cond)) {                                                          \
		failures++;                                                     \
		printf("%s:%d: %s: ", __FILE__, __LINE__, #cond);               \
		printf(__VA_ARGS__);                                            \
		putchar('\n');                                                  \
	}                                                                       \
} while (0)

#define CHECK_SUMMARY() (printf("%d checks, %d failed\n", checks, failures), failures ? 1 : 0)

#endif
