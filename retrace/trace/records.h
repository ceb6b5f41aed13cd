/*
 * records.h: the flat records the scanner writes and the replay compiler reads
 * (retrace.trace.model documents them as CALL_DTYPE and NODE_DTYPE).
 */
#ifndef RETRACE_RECORDS_H
#define RETRACE_RECORDS_H

#include <stdint.h>

/* The version of what the scanner emits: these records and the definitions take() reports.
 * Raise it with any change to them: kept scans (retrace.trace.cache) of an older one are
 * then rebuilt instead of misread. */
#define RECORD_LAYOUT 1

/* Value tags: the format's own type bytes. */
enum {
    T_NULL = 0, T_FALSE, T_TRUE, T_SINT, T_UINT, T_FLOAT, T_DOUBLE, T_STRING,
    T_BLOB, T_ENUM, T_BITMASK, T_ARRAY, T_STRUCT, T_OPAQUE, T_REPR, T_WSTRING,
};

typedef struct {
    uint8_t tag;
    uint8_t pad[3];
    uint32_t aux;   /* count, length or signature id */
    union { int64_t i; uint64_t u; double d; } v;
} Node;

typedef struct {
    uint64_t no;
    uint64_t offset;      /* stream offset of the enter event */
    uint32_t sig;
    uint32_t thread;
    uint32_t flags;
    uint32_t node_start;  /* into the batch's nodes */
    uint32_t node_count;
    uint32_t slot_start;  /* into the batch's slots: one node index (call-relative) or -1 per argument */
    uint32_t nargs;
    int32_t ret;          /* call-relative node index of the return value, or -1 */
    uint32_t bt_start;    /* into the batch's backtrace frame ids */
    uint32_t bt_count;
} CallRec;

#endif
