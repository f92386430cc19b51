package main

import "github.com/spf13/cobra"

// addGeneratorCommands registers generate, docs and sql on root. Owned by the code-generation
// work (issue 4); the root command calls it.
func addGeneratorCommands(root *cobra.Command) {}
