package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

const completionArgs = "bash|zsh|fish"

// completion reads the other commands' flags: it joins the list at init,
// which a reference from the list's own initializer would make a cycle.
func init() {
	commands = append(commands, command{"completion", completionArgs, "print a shell completion script: source <(streamlearn completion bash), or zsh, or fish", runCompletion})
}

// runCompletion prints a shell completion script for the commands and
// their flags, taken from each command's own flag set:
//
//	source <(streamlearn completion bash)   # in ~/.bashrc
//	source <(streamlearn completion zsh)    # in ~/.zshrc
//	streamlearn completion fish | source    # in ~/.config/fish/config.fish
//
// A flag of a few values (flagValues) completes to them.
func runCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("completion", completionArgs, stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "bash" && fs.Arg(0) != "zsh" && fs.Arg(0) != "fish") {
		return usageErr(fs, "want bash, zsh or fish")
	}
	if fs.Arg(0) == "fish" {
		_, err := io.WriteString(stdout, fishCompletion(ctx))
		return err
	}
	var b strings.Builder
	if fs.Arg(0) == "zsh" {
		b.WriteString("autoload -U +X bashcompinit && bashcompinit\n")
	}
	b.WriteString("_streamlearn() {\n")
	b.WriteString("  local cur=${COMP_WORDS[COMP_CWORD]} words\n")
	b.WriteString("  if [ \"$COMP_CWORD\" -eq 1 ]; then\n")
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	fmt.Fprintf(&b, "    COMPREPLY=($(compgen -W %q -- \"$cur\"))\n    return\n  fi\n", strings.Join(names, " "))
	b.WriteString("  case ${COMP_WORDS[1]} in\n")
	for _, c := range commands {
		if c.name == "completion" {
			fmt.Fprintf(&b, "  completion) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")); return ;;\n")
			continue
		}
		fmt.Fprintf(&b, "  %s) words=%q ;;\n", c.name, strings.Join(commandFlags(ctx, c), " "))
	}
	b.WriteString("  *) return ;;\n  esac\n")
	// A flag's values, after it.
	b.WriteString("  case ${COMP_WORDS[COMP_CWORD-1]} in\n")
	for _, f := range slices.Sorted(maps.Keys(flagValues)) {
		fmt.Fprintf(&b, "  %s|-%s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", "--"+f, f, flagValues[f])
	}
	b.WriteString("  esac\n")
	b.WriteString("  if [[ $cur == -* ]]; then\n    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n  else\n    local IFS=$'\\n'\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n}\n") // IFS: a file name per line, so names with spaces stay whole
	b.WriteString("complete -o filenames -F _streamlearn streamlearn\n")
	_, err := io.WriteString(stdout, b.String())
	return err
}

// flagValues are the values of the flags that take one of a few, by
// flag name: completed after the flag.
var flagValues = map[string]string{
	"report":    "text json",
	"format":    "jsonl libsvm csv tsv",
	"log-level": "debug info warn error",
}

// fishCompletion returns the fish completion script: each command, and
// each command's flags, with their values when flagValues has them, and
// files otherwise.
func fishCompletion(ctx context.Context) string {
	var b strings.Builder
	b.WriteString("complete -c streamlearn -f\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "complete -c streamlearn -n __fish_use_subcommand -a %s\n", c.name)
	}
	for _, c := range commands {
		if c.name == "completion" {
			b.WriteString("complete -c streamlearn -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n")
			continue
		}
		cond := fmt.Sprintf("'__fish_seen_subcommand_from %s'", c.name)
		fmt.Fprintf(&b, "complete -c streamlearn -n %s -F\n", cond) // files as arguments
		for _, f := range commandFlags(ctx, c) {
			name := strings.TrimLeft(f, "-")
			opt := "-l " + name
			if len(name) == 1 {
				opt = "-o " + name // -c: Go's flags are single-dash words
			}
			if v, ok := flagValues[name]; ok {
				fmt.Fprintf(&b, "complete -c streamlearn -n %s %s -x -a %q\n", cond, opt, v)
			} else {
				fmt.Fprintf(&b, "complete -c streamlearn -n %s %s\n", cond, opt)
			}
		}
	}
	return b.String()
}

// commandFlags returns the flags of c, as --name, from its help.
func commandFlags(ctx context.Context, c command) []string {
	var help bytes.Buffer
	c.run(ctx, []string{"-h"}, io.Discard, &help)
	var flags []string
	for line := range strings.Lines(help.String()) {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
			if len(name) == 1 {
				flags = append(flags, "-"+name) // -c, -o, -n: as the help shows them
			} else {
				flags = append(flags, "--"+name)
			}
		}
	}
	slices.Sort(flags)
	return slices.Compact(flags)
}
