// A cgo program's faults and signals after large copies through the C
// library (interposed when preloaded): a nil dereference recovered as a
// panic, a signal received with os/signal, and a large copy after each.
// Go exits without running the C library's exit handlers.
package main

/*
#include <stdlib.h>
#include <string.h>

static void *(*volatile copy)(void *, const void *, size_t) = memcpy;
static void *(*volatile set)(void *, int, size_t) = memset;

static void big_copy(void) {
    size_t n = (size_t)64 << 20;
    char *s = malloc(n), *d = malloc(n);
    if (s && d) {
        set(s, 1, n);
        copy(d, s, n);
    }
    free(s);
    free(d);
}
*/
import "C"

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func nilDeref() (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = "recovered"
		}
	}()
	var p *int
	return fmt.Sprint(*p)
}

func main() {
	C.big_copy()
	fmt.Println("OUTCOME copied")
	fmt.Println("OUTCOME nil dereference", nilDeref())
	C.big_copy()
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	fmt.Println("OUTCOME signal", <-ch)
	C.big_copy()
	fmt.Println("OUTCOME done")
}
