"""The fitting paths apart from the maps: Newton's method, preconditioned L-BFGS, the device
L-BFGS, the diagonal start, scipy's L-BFGS-B as the maps run it, BLAS threads and memory
checks. A solver imports no map; the maps (`calbench.calibrators.<family>`) call these."""
