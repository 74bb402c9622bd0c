/* MPICH's ABI, as much of it as the interposition library (_pmpi.c) uses: handles are ints,
 * a status is five ints, the constants below. The library is built by the package's install,
 * where no mpi.h is at hand; tests/test_interpose.py compiles _pmpi.c once more with the
 * wheel's mpicc and mpi.h included first, so every prototype here and every definition there
 * is checked against MPICH's own, and the constants by the static assertions below. */
#ifndef NODESEL_MPICH_H
#define NODESEL_MPICH_H

#include <stdint.h>

#define NS_COMM_WORLD 0x44000000
#define NS_COMM_SELF 0x44000001
#define NS_COMM_NULL 0x04000000
#define NS_REQUEST_NULL 0x2c000000
#define NS_BYTE 0x4c00010d
#define NS_PACKED 0x4c00010f
#define NS_DATATYPE_NULL 0x0c000000
#define NS_PROC_NULL (-1)
#define NS_ANY_SOURCE (-2)
#define NS_ANY_TAG (-1)
#define NS_UNDEFINED (-32766)
#define NS_SUCCESS 0
#define NS_ERR_TRUNCATE 14
#define NS_ERR_OTHER 15
#define NS_STATUS_IGNORE 1 /* (MPI_Status *)1, as is MPI_STATUSES_IGNORE */
#define NS_IN_PLACE (-1)   /* (void *)-1 */
#define NS_BOTTOM 0
#define NS_THREAD_MULTIPLE 3
#define NS_COMBINER_NAMED 1

#ifndef MPI_VERSION /* the build: MPICH's types and constants, by the values above */
typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Request;
typedef int MPI_Op;
typedef int MPI_Group;
typedef int MPI_Message;
typedef int MPI_Win;
typedef long MPI_Aint;
typedef struct MPI_Status {
    int count_lo;
    int count_hi_and_cancelled;
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} MPI_Status;
#define MPI_COMM_WORLD ((MPI_Comm)NS_COMM_WORLD)
#define MPI_COMM_SELF ((MPI_Comm)NS_COMM_SELF)
#define MPI_COMM_NULL ((MPI_Comm)NS_COMM_NULL)
#define MPI_REQUEST_NULL ((MPI_Request)NS_REQUEST_NULL)
#define MPI_BYTE ((MPI_Datatype)NS_BYTE)
#define MPI_PACKED ((MPI_Datatype)NS_PACKED)
#define MPI_PROC_NULL NS_PROC_NULL
#define MPI_ANY_SOURCE NS_ANY_SOURCE
#define MPI_ANY_TAG NS_ANY_TAG
#define MPI_UNDEFINED NS_UNDEFINED
#define MPI_SUCCESS NS_SUCCESS
#define MPI_ERR_TRUNCATE NS_ERR_TRUNCATE
#define MPI_ERR_OTHER NS_ERR_OTHER
#define MPI_STATUS_IGNORE ((MPI_Status *)NS_STATUS_IGNORE)
#define MPI_STATUSES_IGNORE ((MPI_Status *)NS_STATUS_IGNORE)
#define MPI_IN_PLACE ((void *)NS_IN_PLACE)
#define MPI_BOTTOM ((void *)NS_BOTTOM)
#define MPI_THREAD_MULTIPLE NS_THREAD_MULTIPLE
#define MPI_COMBINER_NAMED NS_COMBINER_NAMED
#else /* the check: the values above are MPICH's */
_Static_assert(sizeof(MPI_Comm) == 4 && sizeof(MPI_Request) == 4 && sizeof(MPI_Datatype) == 4,
               "integer handles");
_Static_assert(sizeof(MPI_Status) == 20, "a status of five ints");
_Static_assert(MPI_COMM_WORLD == NS_COMM_WORLD && MPI_COMM_SELF == NS_COMM_SELF &&
                   MPI_COMM_NULL == NS_COMM_NULL,
               "communicators");
_Static_assert(MPI_REQUEST_NULL == NS_REQUEST_NULL && MPI_BYTE == NS_BYTE &&
                   MPI_PACKED == NS_PACKED,
               "handles");
_Static_assert(MPI_PROC_NULL == NS_PROC_NULL && MPI_ANY_SOURCE == NS_ANY_SOURCE &&
                   MPI_ANY_TAG == NS_ANY_TAG && MPI_UNDEFINED == NS_UNDEFINED,
               "ranks and tags");
_Static_assert(MPI_SUCCESS == NS_SUCCESS && MPI_ERR_TRUNCATE == NS_ERR_TRUNCATE &&
                   MPI_ERR_OTHER == NS_ERR_OTHER && MPI_THREAD_MULTIPLE == NS_THREAD_MULTIPLE &&
                   MPI_COMBINER_NAMED == NS_COMBINER_NAMED,
               "codes");
#endif

/* what the library calls of MPI (its profiling names) */
int PMPI_Init(int *argc, char ***argv);
int PMPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int PMPI_Finalize(void);
int PMPI_Abort(MPI_Comm comm, int errorcode);
int PMPI_Initialized(int *flag);
double PMPI_Wtime(void);
int PMPI_Get_library_version(char *version, int *resultlen);
int PMPI_Comm_rank(MPI_Comm comm, int *rank);
int PMPI_Comm_size(MPI_Comm comm, int *size);
int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int PMPI_Comm_free(MPI_Comm *comm);
int PMPI_Comm_group(MPI_Comm comm, MPI_Group *group);
int PMPI_Comm_test_inter(MPI_Comm comm, int *flag);
int PMPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                               int ranks2[]);
int PMPI_Group_free(MPI_Group *group);
int PMPI_Type_size(MPI_Datatype datatype, int *size);
int PMPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent);
int PMPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers, int *num_addresses,
                           int *num_datatypes, int *combiner);
int PMPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent);
int PMPI_Type_create_struct(int count, const int array_of_blocklengths[],
                            const MPI_Aint array_of_displacements[],
                            const MPI_Datatype array_of_types[], MPI_Datatype *newtype);
int PMPI_Type_commit(MPI_Datatype *datatype);
int PMPI_Type_free(MPI_Datatype *datatype);
int PMPI_Get_address(const void *location, MPI_Aint *address);
int PMPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype, int count);
int PMPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count);
int PMPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize,
              int *position, MPI_Comm comm);
int PMPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int *size);
int PMPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
                MPI_Datatype datatype, MPI_Comm comm);
int PMPI_Op_commutative(MPI_Op op, int *commute);
int PMPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype,
                      MPI_Op op);
int PMPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm, MPI_Request *request);
int PMPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                MPI_Comm comm, MPI_Request *request);
int PMPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
               MPI_Request *request);
int PMPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                   MPI_Comm comm, MPI_Request *request);
int PMPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                 MPI_Status *status);
int PMPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
               MPI_Status *status);
int PMPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                  int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                  int recvtag, MPI_Comm comm, MPI_Status *status);
int PMPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                          int source, int recvtag, MPI_Comm comm, MPI_Status *status);
int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
int PMPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int PMPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status);
int PMPI_Start(MPI_Request *request);
int PMPI_Startall(int count, MPI_Request array_of_requests[]);
int PMPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request);
int PMPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm, MPI_Request *request);
int PMPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm, MPI_Request *request);
int PMPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                    MPI_Comm comm, MPI_Request *request);
int PMPI_Cancel(MPI_Request *request);
int PMPI_Request_free(MPI_Request *request);

int PMPI_Wait(MPI_Request *request, MPI_Status *status);
int PMPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);
int PMPI_Waitany(int count, MPI_Request array_of_requests[], int *indx, MPI_Status *status);
int PMPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                  int array_of_indices[], MPI_Status array_of_statuses[]);
int PMPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                 MPI_Status array_of_statuses[]);
int PMPI_Testany(int count, MPI_Request array_of_requests[], int *indx, int *flag,
                 MPI_Status *status);
int PMPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                  int array_of_indices[], MPI_Status array_of_statuses[]);
int PMPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status);
int PMPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
                MPI_Request *request);
int PMPI_Barrier(MPI_Comm comm);
int PMPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int PMPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm);
int PMPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm);
int PMPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int PMPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int PMPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm);
int PMPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm);
int PMPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm);
int PMPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm);
int PMPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm);
int PMPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int PMPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int PMPI_Ibarrier(MPI_Comm comm, MPI_Request *request);
int PMPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                MPI_Request *request);
int PMPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm, MPI_Request *request);
int PMPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int PMPI_Put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
             int target_rank, MPI_Aint target_disp, int target_count,
             MPI_Datatype target_datatype, MPI_Win win);
int PMPI_Get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
             int target_rank, MPI_Aint target_disp, int target_count,
             MPI_Datatype target_datatype, MPI_Win win);

#endif
