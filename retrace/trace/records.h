/*
 * records.h: the flat records the scanner writes and the replay compiler reads.
 *
 * Each record's fields are listed once, here, as (C type, name, struct code): the list
 * declares the C struct and is exported by the scanner as CALL_FIELDS and NODE_FIELDS,
 * from which retrace.trace.model builds its Python view (struct, memoryview). The codes
 * are Python struct's, little-endian,
 * without automatic padding ("3x": three pad bytes); every field sits at its natural
 * alignment, so the C structs have no padding either (Python checks the sizes agree).
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

/* A value's payload: a number, or (strings, blobs) a pool offset, or (arrays, structs,
   reprs) how many nodes follow below it. */
typedef union { int64_t i; uint64_t u; double d; } NodeValue;
typedef uint8_t Pad3[3];

#define NODE_FIELDS(X)                                                                    \
    X(uint8_t, tag, "B")                                                                  \
    X(Pad3, pad, "3x")                                                                    \
    X(uint32_t, aux, "I") /* count, length or signature id */                             \
    X(NodeValue, v, "Q")

#define CALL_FIELDS(X)                                                                    \
    X(uint64_t, no, "Q")                                                                  \
    X(uint64_t, offset, "Q")     /* stream offset of the enter event */                   \
    X(uint32_t, sig, "I")                                                                 \
    X(uint32_t, thread, "I")                                                              \
    X(uint32_t, flags, "I")      /* FAKE and INCOMPLETE as read */                        \
    X(uint32_t, node_start, "I") /* into the batch's nodes */                             \
    X(uint32_t, node_count, "I")                                                          \
    X(uint32_t, slot_start, "I") /* into the batch's slots: a call-relative node or -1 */ \
    X(uint32_t, nargs, "I")                                                               \
    X(int32_t, ret, "i")         /* call-relative node index of the result, or -1 */      \
    X(uint32_t, bt_start, "I")   /* into the batch's backtrace frame ids */               \
    X(uint32_t, bt_count, "I")

#define RECORD_MEMBER(type, name, code) type name;
typedef struct { NODE_FIELDS(RECORD_MEMBER) } Node;
typedef struct { CALL_FIELDS(RECORD_MEMBER) } CallRec;
#undef RECORD_MEMBER

#endif
