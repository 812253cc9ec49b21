// File-system calls of libc that Glibc's module leaves out (no library to link).
// Extended attributes: which files are ferry's copies (FileOrigin).
#include <sys/xattr.h>
// statfs(2), to know a file system's kind, and syncfs(2), declared by unistd.h only under _GNU_SOURCE (FileSync).
#include <sys/vfs.h>
int syncfs(int fd);
// renameat2(2) with RENAME_NOREPLACE (1): a finished file takes its name in one step, never over another file
// (NameClaims.publish); declared by stdio.h only under _GNU_SOURCE (glibc 2.28 and later).
int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
