// File-system calls of libc that Glibc's module leaves out (no library to link).
// Extended attributes: which files are ferry's copies (FileOrigin).
#include <sys/xattr.h>
// statfs(2), to know a file system's kind, and syncfs(2), declared by unistd.h only under _GNU_SOURCE (FileSync).
#include <sys/vfs.h>
int syncfs(int fd);
