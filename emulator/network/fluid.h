/* The fluid model's C interface, shared by emulator/network/_fluid.c (which implements it)
 * and emulator/shaping/_engine.c (which reaches it through the capsule FLUID_API_CAPSULE). */
#ifndef NODESEL_FLUID_H
#define NODESEL_FLUID_H

#include <stdint.h>

#define FLUID_API_VERSION 1
#define FLUID_API_CAPSULE "emulator.network._fluid._C_API"
#define FL_BELL_BYTES 16 /* a doorbell's abstract address (Linux's autobind uses 6) */

enum { FL_NOBODY = 0, FL_RECEIVER = 1, FL_SENDER = 2 };

/* A flow as one of its parties sees it; wall times. `end` is its end (done) or the end
 * its current rate projects; `release` likewise when what is left fits the send buffer;
 * `next_change` the scenario's next change, which may move both. */
typedef struct {
    int state, done, released;
    double start, end, release, next_change;
} FlView;

/* Every call but lock takes a model the caller has locked. */
typedef struct {
    int version;
    void (*lock)(void *fluid);
    void (*unlock)(void *fluid); /* and rings the parties a solve woke */
    void (*advance)(void *fluid, double wall);
    /* a message of `amount` bits from node src to dst starting now; 0, -1 table full,
     * -2 node out of range */
    int (*add)(void *fluid, double wall, int src, int dst, double amount, int refs,
               const char *sender_bell, int sender_len, const char *receiver_bell,
               int receiver_len, int32_t *slot, uint32_t *gen, double *start_wall);
    /* -1 if the slot is not this flow any more */
    int (*view)(void *fluid, int32_t slot, uint32_t gen, int party, FlView *out);
    void (*drop)(void *fluid, int32_t slot, uint32_t gen, int party);
} FluidAPI;

#endif
