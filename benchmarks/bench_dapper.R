# The R package dapper (CRAN; Ju et al. 2022's data augmentation sampler) on the release that
# benchmarks/bench_dapper.py exports: seed 000's linear regression, n = 100, epsilon = 1
# (the same release as benchmarks/bench_defaults.py).
#
#   Rscript benchmarks/bench_dapper.R INPUT.csv OUTPUT.csv NITER WARMUP CHAINS SEED
#
# INPUT.csv (written by bench_dapper.py): columns name,value. Vectors are repeated names in
# order: sdp (the 9 noisy statistics, privpost's label order), scale (Laplace b), n, sigma2,
# tau2, m (covariate means), bx_lo/bx_hi (covariate bounds), by_lo/by_hi (response bounds),
# probe (rows of 3 probe records, row-major) and probe_stat (privpost's statistic of them, used
# to check this file's statistic before sampling).
# OUTPUT.csv: one row per coefficient: variable, ess_bulk, ess_tail, rhat (posterior package),
# mean, mcse_mean, wall_s, draws, accept (mean record acceptance). DRAWS.csv (optional 7th
# argument): the post-warm-up draws, columns chain, beta0..betap, for bench_dapper.py's own
# diagnostics and the posterior comparison with privpost.
# The model is the one privpost fits (privpost.models.LinearRegression(p=2, sigma2=2, tau2=4,
# m=...)): y = b0 + b1 x1 + b2 x2 + e, e ~ N(0, sigma2), x ~ N(m, I), b ~ N(0, tau2 I).
# dapper's API (R/privacy_class.R, R/dapper_sample.R, R/dpout.R), both versions handled:
# * 1.1.0 (CRAN's current release; read from its source, mango-empire/dapper at 5c8f93c):
#   new_privacy(posterior_f, latent_f, mechanism_f, statistic_f, npar, varnames), whose
#   functions must have exactly the formals posterior_f(dmat, theta), latent_f(theta),
#   mechanism_f(sdp, sx), statistic_f(xi, sdp, i) (checked by new_privacy); the result's
#   per-iteration record acceptance is out$mean_accept ((niter - warmup) x chains);
# * 1.0.1: new_privacy(post_f, latent_f, priv_f, st_f, npar, varnames), same formals, and
#   out$accept_prob.
# The version is told apart by new_privacy's formal names. dapper_sample(data_model, sdp,
# init_par, seed, niter, warmup, chains) is the same in both: Ju et al. 2022's Algorithm 1
# (theta | records by the posterior function, then one sweep of independent record proposals
# from latent_f(theta), each accepted with the mechanism ratio). Its chains run through furrr::future_map (sequential unless a future plan is set, as
# here: one core, like privpost's cores=1 side).

args <- commandArgs(trailingOnly = TRUE)
if (!(length(args) %in% 6:7))
  stop("usage: bench_dapper.R INPUT.csv OUTPUT.csv NITER WARMUP CHAINS SEED [DRAWS.csv]")
niter <- as.integer(args[3]); warmup <- as.integer(args[4])
chains <- as.integer(args[5]); seed <- as.integer(args[6])
suppressPackageStartupMessages({ library(dapper); library(posterior) })

kv <- read.csv(args[1], stringsAsFactors = FALSE)
get <- function(key) kv$value[kv$name == key]
sdp <- get("sdp"); b <- get("scale"); n <- as.integer(get("n"))
sigma2 <- get("sigma2"); tau2 <- get("tau2"); m <- get("m")
bx_lo <- get("bx_lo"); bx_hi <- get("bx_hi"); by_lo <- get("by_lo"); by_hi <- get("by_hi")
p <- length(m)

# clamp to the bounds and map to [-1, 1] (privpost.queries.RegressionStats)
norm01 <- function(z, lo, hi) 2 * (pmin(pmax(z, lo), hi) - lo) / (hi - lo) - 1

# per-record contribution in privpost's order: XtY[0..p], YtY, XtX[j,k] for j <= k row-major
# without the constant (0, 0) entry (iu: those entries' linear indices in the (p+1)^2 matrix,
# computed once so that st_f is lean vectorised R)
iu <- unlist(lapply(1:(p + 1), function(j) (j:(p + 1) - 1) * (p + 1) + j))[-1]
st_f <- function(xi, sdp, i) {
  xt <- c(1, norm01(xi[1:p], bx_lo, bx_hi))
  yt <- norm01(xi[p + 1], by_lo, by_hi)
  c(xt * yt, yt * yt, (xt %o% xt)[iu])
}

# Laplace mechanism: log density of the released vector given the statistic (constant dropped)
priv_f <- function(sdp, sx) -sum(abs(sdp - sx)) / b

latent_f <- function(theta) {
  x <- matrix(rnorm(n * p), ncol = p) + matrix(m, n, p, byrow = TRUE)
  y <- theta[1] + x %*% theta[2:(p + 1)] + rnorm(n, 0, sqrt(sigma2))
  cbind(x, y)
}

# exact conjugate draw of beta given complete records (prior N(0, tau2 I), known sigma2)
post_f <- function(dmat, theta) {
  X <- cbind(1, dmat[, 1:p, drop = FALSE]); y <- dmat[, p + 1]
  prec <- crossprod(X) / sigma2 + diag(p + 1) / tau2
  R <- chol(prec)
  mu <- backsolve(R, forwardsolve(t(R), crossprod(X, y) / sigma2))
  as.numeric(mu + backsolve(R, rnorm(p + 1)))
}

# check the statistic against privpost's on the probe records before timing anything
probe <- matrix(get("probe"), ncol = p + 1, byrow = TRUE)
mine <- Reduce(`+`, lapply(seq_len(nrow(probe)), function(i) st_f(probe[i, ], sdp, i)))
if (max(abs(mine - get("probe_stat"))) > 1e-9)
  stop("bench_dapper.R: the statistic differs from privpost's RegressionStats; not timing")

if ("posterior_f" %in% names(formals(new_privacy))) {          # dapper >= 1.1.0
  dmod <- new_privacy(posterior_f = post_f, latent_f = latent_f, mechanism_f = priv_f,
                      statistic_f = st_f, npar = p + 1, varnames = paste0("beta", 0:p))
} else {                                                        # dapper 1.0.x
  dmod <- new_privacy(post_f = post_f, latent_f = latent_f, priv_f = priv_f, st_f = st_f,
                      npar = p + 1, varnames = paste0("beta", 0:p))
}
t0 <- proc.time()[["elapsed"]]
out <- dapper_sample(data_model = dmod, sdp = sdp, init_par = rep(0, p + 1), seed = seed, niter = niter,
                     warmup = warmup, chains = chains)
wall <- proc.time()[["elapsed"]] - t0

kept <- niter - warmup
# out$chain: a draws_matrix of the chains stacked by row (chain 1's kept draws first)
draws <- unclass(out$chain)
rows <- lapply(seq_len(p + 1), function(j) {
  x <- matrix(as.numeric(draws[, j]), ncol = chains)   # iterations x chains
  data.frame(variable = paste0("beta", j - 1), ess_bulk = posterior::ess_bulk(x),
             ess_tail = posterior::ess_tail(x), rhat = posterior::rhat(x), mean = mean(x),
             mcse_mean = posterior::mcse_mean(x), wall_s = wall, draws = kept * chains,
             accept = mean(if (is.null(out$mean_accept)) out$accept_prob else out$mean_accept))
})
write.csv(do.call(rbind, rows), args[2], row.names = FALSE)
if (length(args) == 7) {
  d <- data.frame(chain = rep(seq_len(chains), each = kept), matrix(as.numeric(draws), ncol = p + 1))
  names(d) <- c("chain", paste0("beta", 0:p))
  write.csv(d, args[7], row.names = FALSE)
}
