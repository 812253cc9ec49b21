// libxml2's HTML parser (Debian's libxml2-dev, which the Swift toolchain itself needs): directory listings as
// real servers write them are HTML, rarely well-formed XML.
#include <libxml/xmlversion.h>
// Debian's libxml2 is built with ICU, whose headers then come in with encoding.h and clash with Foundation's own
// copy of ICU (_FoundationICU) in one Swift module. Nothing here uses libxml2's ICU converters.
#undef LIBXML_ICU_ENABLED
#include <libxml/HTMLparser.h>
#include <libxml/tree.h>
#include <libxml/parser.h>

// xmlFree is a global function pointer, which Swift 6 refuses to read from concurrent code.
static inline void ferry_xml_free(void *pointer) { xmlFree(pointer); }
