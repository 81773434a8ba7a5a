package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

const completionArgs = "bash|zsh"

// completion reads the other commands' flags: it joins the list at init,
// which a reference from the list's own initializer would make a cycle.
func init() {
	commands = append(commands, command{"completion", completionArgs, "print a shell completion script: source <(streamlearn completion bash)", runCompletion})
}

// runCompletion prints a shell completion script for the commands and
// their flags, taken from each command's own flag set:
//
//	source <(streamlearn completion bash)   # in ~/.bashrc
//	source <(streamlearn completion zsh)    # in ~/.zshrc
func runCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("completion", completionArgs, stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "bash" && fs.Arg(0) != "zsh") {
		return usageErr(fs, "want bash or zsh")
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
	b.WriteString("  if [[ $cur == -* ]]; then\n    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n  else\n    local IFS=$'\\n'\n    COMPREPLY=($(compgen -f -- \"$cur\"))\n  fi\n}\n") // IFS: a file name per line, so names with spaces stay whole
	b.WriteString("complete -o filenames -F _streamlearn streamlearn\n")
	_, err := io.WriteString(stdout, b.String())
	return err
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
