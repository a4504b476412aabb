"""TF's CPU kernels as mirrorlab reproduces them (Philox, libm, Eigen summation order): internal."""
