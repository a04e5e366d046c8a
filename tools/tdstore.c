/* SPDX-License-Identifier: MIT */
/*
 * tdstore.c - the tdstore command: git-style subcommands dispatched from
 * one table (`tdstore <subcommand> [args]`), and `tdstore help`.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

/* Every subcommand, in the order `tdstore help` lists them. */
static const tool_cmd commands[] = {
	{ "help", "[SUBCOMMAND]", "list the subcommands, or show how to call one", cmd_help },
	{ "version", "", "print the version of the loaded libtdstore", cmd_version },
	{ "demo", "[--quiet]", "build the benchmark fixtures, run and verify the core operations",
		cmd_demo },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

const tool_cmd *tool_find_cmd(const char *name)
{
	size_t i;

	for (i = 0; i < N_COMMANDS; i++) {
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	}
	return NULL;
}

static void print_cmd_usage(FILE *f, const tool_cmd *cmd)
{
	fprintf(f, "usage: tdstore %s%s%s\n", cmd->name, cmd->args[0] ? " " : "", cmd->args);
}

int tool_usage_error(const tool_cmd *cmd)
{
	print_cmd_usage(stderr, cmd);
	return TOOL_EXIT_USAGE;
}

static void print_usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: tdstore <subcommand> [arguments]\n\nsubcommands:\n");
	for (i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int cmd_help(int argc, char **argv)
{
	const tool_cmd *cmd;

	if (argc == 1) {
		print_usage(stdout);
		return TOOL_EXIT_OK;
	}
	if (argc != 2)
		return tool_usage_error(tool_find_cmd("help"));
	cmd = tool_find_cmd(argv[1]);
	if (!cmd) {
		fprintf(stderr, "tdstore help: unknown subcommand '%s'\n", argv[1]);
		print_usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	print_cmd_usage(stdout, cmd);
	printf("\n%s\n", cmd->summary);
	return TOOL_EXIT_OK;
}

int main(int argc, char **argv)
{
	const tool_cmd *cmd;

	if (argc < 2) {
		print_usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return cmd_help(1, argv + 1);
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(1, argv + 1);
	cmd = tool_find_cmd(argv[1]);
	if (!cmd) {
		fprintf(stderr, "tdstore: unknown subcommand '%s'\n", argv[1]);
		print_usage(stderr);
		return TOOL_EXIT_USAGE;
	}
	return cmd->run(argc - 1, argv + 1);
}
