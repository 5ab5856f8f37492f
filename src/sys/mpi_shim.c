/* The C side of ringreduce's own MPI binding (the `mpi` feature).
 *
 * MPI's handles (MPI_Comm, MPI_Request) are pointers in Open MPI and ints in
 * MPICH, and its constants are macros: this file is compiled with the
 * system's `mpicc` (build.rs), so the Rust side sees only ints, pointers to
 * bytes and an opaque request pointer, whatever MPI the machine has. Every
 * function returns the MPI error code (MPI_SUCCESS is 0); communicators are
 * small indexes into a table filled at set-up. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define RR_MAX_COMMS 64
static MPI_Comm comms[RR_MAX_COMMS];
static int ncomms = 0;

static MPI_Comm comm_of(int c) {
    if (c < 0 || c >= ncomms) return MPI_COMM_NULL;
    return comms[c];
}

static int add_comm(MPI_Comm c, int *out) {
    if (ncomms >= RR_MAX_COMMS) return MPI_ERR_OTHER;
    comms[ncomms] = c;
    *out = ncomms++;
    return MPI_SUCCESS;
}

int rr_mpi_initialized(int *flag) { return MPI_Initialized(flag); }
int rr_mpi_finalized(int *flag) { return MPI_Finalized(flag); }

/* MPI_THREAD_MULTIPLE asked for; `provided` says what the library gives.
 * The world communicator is index 0, with errors returned, not fatal. */
int rr_mpi_init(int *provided, int *world) {
    int e = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
    if (e != MPI_SUCCESS) return e;
    e = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (e != MPI_SUCCESS) return e;
    return add_comm(MPI_COMM_WORLD, world);
}

int rr_mpi_thread_multiple(void) { return MPI_THREAD_MULTIPLE; }

int rr_mpi_finalize(void) { return MPI_Finalize(); }

int rr_mpi_abort(int c, int code) { return MPI_Abort(comm_of(c), code); }

int rr_comm_rank(int c, int *rank) { return MPI_Comm_rank(comm_of(c), rank); }
int rr_comm_size(int c, int *size) { return MPI_Comm_size(comm_of(c), size); }

/* MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): the ranks that share memory. */
int rr_comm_split_shared(int c, int key, int *out) {
    MPI_Comm n;
    int e = MPI_Comm_split_type(comm_of(c), MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &n);
    if (e != MPI_SUCCESS) return e;
    MPI_Comm_set_errhandler(n, MPI_ERRORS_RETURN);
    return add_comm(n, out);
}

int rr_comm_split(int c, int color, int key, int *out) {
    MPI_Comm n;
    int e = MPI_Comm_split(comm_of(c), color, key, &n);
    if (e != MPI_SUCCESS) return e;
    MPI_Comm_set_errhandler(n, MPI_ERRORS_RETURN);
    return add_comm(n, out);
}

/* Requests live on the heap; rr_test frees one when it completes,
 * rr_request_free drops one that did not (cancelled first). */
static int new_req(void **out, MPI_Request **r) {
    *r = (MPI_Request *)malloc(sizeof(MPI_Request));
    if (*r == NULL) return MPI_ERR_NO_MEM;
    *out = *r;
    return MPI_SUCCESS;
}

int rr_isend(int c, const void *buf, int bytes, int dest, int tag, void **req) {
    MPI_Request *r;
    int e = new_req(req, &r);
    if (e != MPI_SUCCESS) return e;
    e = MPI_Isend(buf, bytes, MPI_BYTE, dest, tag, comm_of(c), r);
    if (e != MPI_SUCCESS) { free(r); *req = NULL; }
    return e;
}

int rr_ibarrier(int c, void **req) {
    MPI_Request *r;
    int e = new_req(req, &r);
    if (e != MPI_SUCCESS) return e;
    e = MPI_Ibarrier(comm_of(c), r);
    if (e != MPI_SUCCESS) { free(r); *req = NULL; }
    return e;
}

int rr_iallgather(int c, const void *send, int bytes, void *recv, void **req) {
    MPI_Request *r;
    int e = new_req(req, &r);
    if (e != MPI_SUCCESS) return e;
    e = MPI_Iallgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, comm_of(c), r);
    if (e != MPI_SUCCESS) { free(r); *req = NULL; }
    return e;
}

int rr_iallgatherv(int c, const void *send, int bytes, void *recv, const int *counts,
                   const int *displs, void **req) {
    MPI_Request *r;
    int e = new_req(req, &r);
    if (e != MPI_SUCCESS) return e;
    e = MPI_Iallgatherv(send, bytes, MPI_BYTE, recv, counts, displs, MPI_BYTE, comm_of(c), r);
    if (e != MPI_SUCCESS) { free(r); *req = NULL; }
    return e;
}

/* In place on `count` elements of `buf`: MPI_Iallreduce. `type` and `op`
 * are the binding's codes (2..7: int32, uint32, int64, uint64, float,
 * double; 0..3: sum, prod, max, min). The 8-bit integers are not taken:
 * Open MPI 4.1's vectorized ops saturate their sums (open-mpi/ompi#8045). */
int rr_iallreduce(int c, void *buf, int count, int type, int op, void **req) {
    MPI_Datatype t;
    MPI_Op o;
    switch (type) {
    case 2: t = MPI_INT32_T; break;
    case 3: t = MPI_UINT32_T; break;
    case 4: t = MPI_INT64_T; break;
    case 5: t = MPI_UINT64_T; break;
    case 6: t = MPI_FLOAT; break;
    case 7: t = MPI_DOUBLE; break;
    default: return MPI_ERR_TYPE;
    }
    switch (op) {
    case 0: o = MPI_SUM; break;
    case 1: o = MPI_PROD; break;
    case 2: o = MPI_MAX; break;
    case 3: o = MPI_MIN; break;
    default: return MPI_ERR_OP;
    }
    MPI_Request *r;
    int e = new_req(req, &r);
    if (e != MPI_SUCCESS) return e;
    e = MPI_Iallreduce(MPI_IN_PLACE, buf, count, t, o, comm_of(c), r);
    if (e != MPI_SUCCESS) { free(r); *req = NULL; }
    return e;
}

/* *done is 1 once the request completed (then it is freed). */
int rr_test(void *req, int *done) {
    MPI_Request *r = (MPI_Request *)req;
    int e = MPI_Test(r, done, MPI_STATUS_IGNORE);
    if (e == MPI_SUCCESS && *done) free(r);
    return e;
}

/* A request that will not be waited for any more: cancel it (a send or a
 * receive; collectives cannot be cancelled and are leaked) and free it. */
void rr_request_drop(void *req, int collective) {
    MPI_Request *r = (MPI_Request *)req;
    if (!collective) {
        MPI_Cancel(r);
        MPI_Request_free(r);
        free(r);
    }
}

/* A message waiting on `c` from anyone with any tag: its source, tag and
 * size in bytes. */
int rr_iprobe(int c, int *flag, int *source, int *tag, int *bytes) {
    MPI_Status st;
    int e = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_of(c), flag, &st);
    if (e != MPI_SUCCESS || !*flag) return e;
    *source = st.MPI_SOURCE;
    *tag = st.MPI_TAG;
    return MPI_Get_count(&st, MPI_BYTE, bytes);
}

/* Start receiving the message rr_iprobe found: a request, waited for with
 * rr_test under the caller's deadline. A probed message is not "already
 * here": a large one comes by rendezvous, and its sender may die before
 * all of it arrives (a blocking receive then never returns). */
int rr_irecv(int c, void *buf, int bytes, int source, int tag, void **req) {
    MPI_Request *r;
    int e = new_req(req, &r);
    if (e != MPI_SUCCESS) return e;
    e = MPI_Irecv(buf, bytes, MPI_BYTE, source, tag, comm_of(c), r);
    if (e != MPI_SUCCESS) { free(r); *req = NULL; }
    return e;
}

int rr_error_string(int code, char *buf, int cap) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    int e = MPI_Error_string(code, s, &len);
    if (e != MPI_SUCCESS) return e;
    if (len >= cap) len = cap - 1;
    memcpy(buf, s, (size_t)len);
    buf[len] = 0;
    return MPI_SUCCESS;
}
