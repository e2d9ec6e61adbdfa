/* Modem lines for pseudo-terminals, preloaded into ser2net for the network boards' tests.

   A pty has no modem lines: ioctl(TIOCMGET/TIOCMSET/TIOCMBIS/TIOCMBIC) on it fails with
   ENOTTY, so ser2net never acknowledges an RFC 2217 client's "DTR on" (pyserial asks for it
   on every open) and the client gives up. Preloaded (LD_PRELOAD), this keeps the lines of
   such an fd in memory and reports success, as a USB serial adapter would; every other
   ioctl, and every fd that has real lines, goes to the C library untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <termios.h>

#define FDS 1024
static int lines[FDS];

int ioctl(int fd, unsigned long request, ...) {
    static int (*real)(int, unsigned long, ...);
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!real) real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
    int rc = real(fd, request, arg);
    if (rc == 0 || errno != ENOTTY || fd < 0 || fd >= FDS || arg == 0) return rc;
    int *bits = arg;
    switch (request) {
    case TIOCMGET: *bits = lines[fd] | TIOCM_CTS | TIOCM_DSR | TIOCM_CD; return 0;
    case TIOCMSET: lines[fd] = *bits; return 0;
    case TIOCMBIS: lines[fd] |= *bits; return 0;
    case TIOCMBIC: lines[fd] &= ~*bits; return 0;
    default: return rc;
    }
}
