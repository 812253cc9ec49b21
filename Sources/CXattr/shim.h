// Extended attributes (libc's, no library to link): which files are ferry's copies (FileOrigin).
#include <sys/xattr.h>
