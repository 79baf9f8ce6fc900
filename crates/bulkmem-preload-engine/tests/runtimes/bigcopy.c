/* bigcopy.c - the JNI side of Jsig.java: 64 MiB copied and set through
 * the C library's memcpy and memset (interposed when preloaded), through
 * volatile pointers so the compiler keeps the calls. */
#include <jni.h>
#include <stdlib.h>
#include <string.h>

static void *(*volatile copy)(void *, const void *, size_t) = memcpy;
static void *(*volatile set)(void *, int, size_t) = memset;

JNIEXPORT void JNICALL Java_Jsig_bigCopy(JNIEnv *env, jclass cls)
{
    (void)env;
    (void)cls;
    size_t n = (size_t)64 << 20;
    char *s = malloc(n), *d = malloc(n);
    if (s && d) {
        set(s, 1, n);
        copy(d, s, n);
    }
    free(s);
    free(d);
}
