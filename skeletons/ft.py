"""FT skeleton: the 3-D FFT time evolution of NPB FT (ft.f, 1-D layout).

Numbers from the NPB 3.3 specification: grid nx x ny x nz and niter per class (S: 64^3, 6;
A: 256 x 256 x 128, 6). With the 1-D layout each 3-D FFT does its 2-D FFTs locally and one
global transpose, an ``MPI_Alltoall`` of nx*ny*nz/p complex values per rank. The program
runs its set-up and first forward FFT once untimed ("to make sure all data is touched"),
then again timed; per iteration ``evolve``, an inverse FFT and a checksum (one complex,
summed). Compute: 5 N log2 N flops per FFT and 6 N per evolve (N = nx*ny*nz), over p.
"""

import math

import numpy as np

from . import register


@register
def ft(run):
    p, comm, n = run.params, run.comm, run.size
    total = p["nx"] * p["ny"] * p["nz"]
    if n > p["nz"]:
        raise ValueError(f"FT class {run.npb_class} with the 1-D layout needs p <= nz = {p['nz']}")
    local = total // n
    send = run.buffer(local, np.complex128).reshape(n, -1)
    recv = np.empty_like(send)
    checksum, summed = run.buffer(1, np.complex128), run.buffer(1, np.complex128)
    fft_flops = 5 * total * math.log2(total) / n

    def fft():
        run.compute(fft_flops)
        with run.phase("transpose"):
            comm.Alltoall(send, recv)

    with run.phase("set-up"):
        fft()  # untimed: the forward transform of the initial conditions
    fft()  # and again, timed
    niter = run.niter(p["niter"])
    for _ in range(niter):
        run.compute(6 * total / n)  # evolve
        fft()  # inverse transform
        run.compute(2 * 1024 / n)  # checksum of 1024 elements
        with run.phase("checksum"):
            comm.Allreduce(checksum, summed)
    return niter
