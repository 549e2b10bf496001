package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

func cmdInit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "config.yaml", "file to write")
	model := fs.String("model", "/path/to/model", "model directory to put in modelPath")
	force := fs.Bool("f", false, "overwrite an existing file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(*out); err == nil && !*force {
		return fmt.Errorf("%s exists; pass -f to overwrite it", *out)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(*out, serving.Template(*model), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (modelPath: %s); start with: cluster-serving start -c %s\n", *out, *model, *out)
	return nil
}
