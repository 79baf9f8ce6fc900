/* fake_jsig.c - a stand-in for OpenJDK's libjsig (src/java.base/unix/
 * native/libjsig/jsig.c), for machines without a JDK: the same answers to
 * sigaction. Between JVM_begin_signal_setting and JVM_end_signal_setting
 * (the JVM installing its handlers) an action is installed and the one it
 * replaced is saved; afterwards, for a signal the JVM owns, an action is
 * saved and NOT installed (the JVM's handler chains to it), and a query
 * answers with the saved action, not the kernel's: the action from before
 * the JVM, SIG_DFL for a program that had none. An interposer reading the
 * program's dispositions through this sigaction gets that stale answer;
 * the kernel knows better. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static struct sigaction sact[NSIG];
static sigset_t jvmsigs;
static bool installing, installed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int os_sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
    static sigaction_fn next;
    if (!next)
        next = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    return next(sig, act, oact);
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
    struct sigaction old;
    int res = 0;
    pthread_mutex_lock(&lock);
    if (installed && sigismember(&jvmsigs, sig) == 1) {
        if (oact)
            *oact = sact[sig];
        if (act)
            sact[sig] = *act;
    } else if (installing) {
        res = os_sigaction(sig, act, &old);
        sact[sig] = old;
        if (oact)
            *oact = old;
        sigaddset(&jvmsigs, sig);
    } else {
        res = os_sigaction(sig, act, oact);
    }
    pthread_mutex_unlock(&lock);
    return res;
}

void JVM_begin_signal_setting(void)
{
    pthread_mutex_lock(&lock);
    sigemptyset(&jvmsigs);
    installing = true;
    pthread_mutex_unlock(&lock);
}

void JVM_end_signal_setting(void)
{
    pthread_mutex_lock(&lock);
    installed = true;
    installing = false;
    pthread_mutex_unlock(&lock);
}

struct sigaction *JVM_get_signal_action(int sig)
{
    return sigismember(&jvmsigs, sig) == 1 ? &sact[sig] : NULL;
}
