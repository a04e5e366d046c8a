/* SPDX-License-Identifier: MIT */
/*
 * cmd.h - the subcommands of the tdstore command and what they share.
 *
 * To add a subcommand: write tools/cmd_<name>.c defining
 * `int cmd_<name>(int argc, char **argv)`, declare it below, add one row to
 * the table in tools/tdstore.c and the file to tools/local.mk.
 */
#ifndef TD_TOOLS_CMD_H
#define TD_TOOLS_CMD_H

/* Exit statuses of the tdstore command. */
#define TOOL_EXIT_OK 0    /* success */
#define TOOL_EXIT_FAIL 1  /* the operation failed */
#define TOOL_EXIT_USAGE 2 /* bad command line: usage went to stderr */

/*
 * A subcommand. `argv[0]` is the subcommand's name and `argc` counts it;
 * the return value is the exit status (one of TOOL_EXIT_*).
 */
typedef int (*tool_cmd_fn)(int argc, char **argv);

/* One row of the subcommand table. */
typedef struct tool_cmd {
	const char *name;    /* what the user types: `tdstore <name>` */
	const char *args;    /* its arguments, for usage lines ("" for none) */
	const char *summary; /* one line for `tdstore help` */
	tool_cmd_fn run;
} tool_cmd;

/* Print `usage: tdstore <name> <args>` for `cmd` to stderr; return TOOL_EXIT_USAGE. */
int tool_usage_error(const tool_cmd *cmd);

/* The row of the table named `name`, or NULL. */
const tool_cmd *tool_find_cmd(const char *name);

/* Subcommands (tools/cmd_<name>.c; `help` lives in tools/tdstore.c). */
int cmd_help(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_demo(int argc, char **argv);

#endif /* TD_TOOLS_CMD_H */
