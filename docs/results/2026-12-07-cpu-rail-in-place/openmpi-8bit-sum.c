#include <mpi.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define N 4099
#define T(NAME, CT, MT) static void t_##NAME(int r, int p){ \
  MPI_Op ops[4]={MPI_SUM,MPI_PROD,MPI_MAX,MPI_MIN}; const char*on[4]={"sum","prod","max","min"}; \
  for(int o=0;o<4;o++){ CT *a=malloc(N*sizeof(CT)), *e=malloc(N*sizeof(CT)); \
   for(int i=0;i<N;i++){ uint64_t bits=0x9e3779b97f4a7c15ull*(uint64_t)(i*7+r*13+1); CT v; memcpy(&v,&bits,sizeof v < 8 ? sizeof v : 8); \
     if(MT==MPI_FLOAT||MT==MPI_DOUBLE) v=(CT)((double)(int)(bits%2001)-1000.0)/8; a[i]=v; } \
   for(int i=0;i<N;i++){ CT acc=0; for(int q=0;q<p;q++){ uint64_t bits=0x9e3779b97f4a7c15ull*(uint64_t)(i*7+q*13+1); CT v; memcpy(&v,&bits,sizeof v < 8 ? sizeof v : 8); \
     if(MT==MPI_FLOAT||MT==MPI_DOUBLE) v=(CT)((double)(int)(bits%2001)-1000.0)/8; \
     if(q==0) acc=v; else if(o==0) acc=(CT)(acc+v); else if(o==1) acc=(CT)(acc*v); else if(o==2) acc= v>acc?v:acc; else acc= v<acc?v:acc; } e[i]=acc; } \
   MPI_Request q; MPI_Iallreduce(MPI_IN_PLACE,a,N,MT,ops[o],MPI_COMM_WORLD,&q); MPI_Wait(&q,MPI_STATUS_IGNORE); \
   int bad=0; for(int i=0;i<N;i++) if(memcmp(&a[i],&e[i],sizeof(CT))) bad++; \
   if(r==0) printf("%-8s %-4s %s (%d wrong of %d)\n", #NAME, on[o], bad?"WRONG":"ok", bad, N); free(a); free(e);} }
T(int8,int8_t,MPI_INT8_T) T(uint8,uint8_t,MPI_UINT8_T) T(int32,int32_t,MPI_INT32_T) T(uint32,uint32_t,MPI_UINT32_T)
T(int64,int64_t,MPI_INT64_T) T(uint64,uint64_t,MPI_UINT64_T) T(float,float,MPI_FLOAT) T(double,double,MPI_DOUBLE)
int main(int c, char**v){ MPI_Init(&c,&v); int r,p; MPI_Comm_rank(MPI_COMM_WORLD,&r); MPI_Comm_size(MPI_COMM_WORLD,&p);
 t_int8(r,p); t_uint8(r,p); t_int32(r,p); t_uint32(r,p); t_int64(r,p); t_uint64(r,p); t_float(r,p); t_double(r,p); MPI_Finalize(); }
