"""Non-parametric maps that average calibration errors or labels over a neighbourhood: KNN,
kernels (Valk's and the Dirichlet kernel) and the random calibration forest."""
