package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/stratafs/stratafs/object"
)

// runKey manages the S3 access keys kept in the meta store. Each key is
// an owner of its own: it sees and uses only the buckets it creates
// (the root key, from the environment or DATA_DIR/credentials, uses
// all). `stratafs serve` looks keys up on every request, so a key
// created or removed here counts from the next request on; with the
// embedded store this runs while the server is stopped, as every
// command that opens the data directory does.
func runKey(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("missing subcommand: %w", errUsage)
	}
	sub := args[0]
	fs := flag.NewFlagSet("key "+sub, flag.ContinueOnError)
	switch sub {
	case "create":
		name := fs.String("name", "", "display name of the key's owner in S3 listings (default: the key id)")
		if _, err := e.parse(fs, args[1:], 0, 0); err != nil {
			return err
		}
		return withService(e, func(svc *object.Service) error {
			k, err := svc.CreateAccessKey(ctx, object.NewAccessKey(*name, false))
			if err != nil {
				return err
			}
			// The secret is printed this once; `key ls` never shows it.
			fmt.Fprintf(e.stdout, "created access key %s; its secret is not shown again:\n", k.ID)
			fmt.Fprintf(e.stdout, "  export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s\n", k.ID, k.Secret)
			return nil
		})
	case "ls":
		if _, err := e.parse(fs, args[1:], 0, 0); err != nil {
			return err
		}
		return withService(e, func(svc *object.Service) error {
			keys, err := svc.ListAccessKeys(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
			for _, k := range keys {
				role := "owner"
				if k.Root {
					role = "root"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Created.Format(time.RFC3339), k.ID, role, k.Name)
			}
			return tw.Flush()
		})
	case "rm":
		pos, err := e.parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		return withService(e, func(svc *object.Service) error {
			return svc.DeleteAccessKey(ctx, pos[0])
		})
	}
	return fmt.Errorf("unknown subcommand %q: %w", sub, errUsage)
}
