/* SPDX-License-Identifier: MIT */
/*
 * bench_na.c - the seed rows from tensordict benchmark files with no C
 * counterpart at all (nn modules, functorch, vmap, tensorclass,
 * torch.distributed), each listed as n/a with the reason, so that the
 * report accounts for every row of the seed table.
 */
#include "config.h"

#include "bench.h"
#include "bench_suites.h"

#define ROW_NA(nm, why) \
	{ \
		.name = nm, .note = why \
	}

#define NA_MODULE \
	"runs a TensorDictModule (a torch.nn.Module reading and writing " \
	"keys): no nn modules in C"
#define NA_FUNCTORCH \
	"functorch / torch.func over a torch.nn.Sequential: no nn " \
	"modules in C"
#define NA_VMAP \
	"torch.vmap of an MLP with TensorDict parameters: no vmap or nn " \
	"modules in C"
#define NA_TO_MODULE \
	"TensorDict.to_module(nn.Transformer()): swaps nn.Module " \
	"parameters, no nn modules in C"
#define NA_TC \
	"@tensorclass (a typed Python class over a TensorDict): Python " \
	"class machinery, no C counterpart"

static const bench_row nn_rows[] = {
	ROW_NA("test_tdmodule", NA_MODULE),
	ROW_NA("test_tdmodule_dispatch", NA_MODULE),
	ROW_NA("test_tdseq", "runs a TensorDictSequential: no nn modules in C"),
	ROW_NA("test_tdseq_dispatch", "runs a TensorDictSequential: no nn modules in C"),
	ROW_NA("test_instantiation_functorch", NA_FUNCTORCH),
	ROW_NA("test_instantiation_td",
		"TensorDict.from_module(nn.Sequential): no nn "
		"modules in C"),
	ROW_NA("test_exec_functorch", NA_FUNCTORCH),
	ROW_NA("test_exec_functional_call", NA_FUNCTORCH),
	ROW_NA("test_exec_td",
		"runs an nn.Sequential with TensorDict parameters: no nn "
		"modules in C"),
	ROW_NA("test_exec_td_decorator", NA_TO_MODULE),
	ROW_NA("test_vmap_mlp_speed[True-True]", NA_VMAP),
	ROW_NA("test_vmap_mlp_speed[True-False]", NA_VMAP),
	ROW_NA("test_vmap_mlp_speed[False-True]", NA_VMAP),
	ROW_NA("test_vmap_mlp_speed[False-False]", NA_VMAP),
	ROW_NA("test_vmap_mlp_speed_decorator[True-True]", NA_VMAP),
	ROW_NA("test_vmap_mlp_speed_decorator[True-False]", NA_VMAP),
	ROW_NA("test_vmap_mlp_speed_decorator[False-True]", NA_VMAP),
	ROW_NA("test_vmap_mlp_speed_decorator[False-False]", NA_VMAP),
	ROW_NA("test_to_module_speed[True]", NA_TO_MODULE),
	ROW_NA("test_to_module_speed[False]", NA_TO_MODULE),
};

static const bench_row tensorclass_rows[] = {
	ROW_NA("test_tc_init", NA_TC),
	ROW_NA("test_tc_init_nested", NA_TC),
	ROW_NA("test_tc_first_layer_tensor", NA_TC),
	ROW_NA("test_tc_first_layer_nontensor", NA_TC),
	ROW_NA("test_tc_second_layer_tensor", NA_TC),
	ROW_NA("test_tc_second_layer_nontensor", NA_TC),
};

static const bench_row distributed_rows[] = {
	ROW_NA("test_distributed",
		"torch.distributed between processes: tdstore's "
		"scale-out (MPI) is not built yet"),
};

const bench_suite bench_nn_suite = { "benchmarks/nn/functional_benchmarks_test.py", nn_rows,
	sizeof(nn_rows) / sizeof(nn_rows[0]) };

const bench_suite bench_tensorclass_suite = { "benchmarks/tensorclass/test_tensorclass_speed.py",
	tensorclass_rows, sizeof(tensorclass_rows) / sizeof(tensorclass_rows[0]) };

const bench_suite bench_distributed_suite = { "benchmarks/distributed/distributed_benchmark_test.py",
	distributed_rows, sizeof(distributed_rows) / sizeof(distributed_rows[0]) };
