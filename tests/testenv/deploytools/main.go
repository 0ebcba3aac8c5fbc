// Command deploytools is helm and kustomize in one executable, built from
// their Go modules by concord's test harness (never downloaded prebuilt):
//
//	deploytools helm ARGS...            helm's own command line (lint, template, ...)
//	deploytools kustomize build DIR     the manifests of a kustomization, on stdout
//	deploytools version                 the pinned versions
package main

import (
	"errors"
	"fmt"
	"os"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The versions go.mod pins, printed by `deploytools version`.
const (
	helmVersion      = "helm.sh/helm/v4 v4.3.2"
	kustomizeVersion = "sigs.k8s.io/kustomize/api v0.21.2"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "helm":
		os.Exit(helm(os.Args[2:]))
	case "kustomize":
		if len(os.Args) != 4 || os.Args[2] != "build" {
			usage()
		}
		if err := kustomizeBuild(os.Args[3]); err != nil {
			fmt.Fprintf(os.Stderr, "kustomize build %s: %v\n", os.Args[3], err)
			os.Exit(1)
		}
	case "version":
		fmt.Println(helmVersion)
		fmt.Println(kustomizeVersion)
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: deploytools helm ARGS... | deploytools kustomize build DIR | deploytools version")
	os.Exit(2)
}

// helm runs helm's root command as cmd/helm does and returns its exit code.
func helm(args []string) int {
	kube.ManagedFieldsManager = "helm"
	cmd, err := helmcmd.NewRootCmd(os.Stdout, args, helmcmd.SetupLogging)
	if err != nil {
		fmt.Fprintf(os.Stderr, "helm: %v\n", err)
		return 1
	}
	// cobra reads os.Args unless told otherwise; "helm" is os.Args[1].
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		if cerr, ok := errors.AsType[helmcmd.CommandError](err); ok {
			return cerr.ExitCode
		}
		return 1
	}
	return 0
}

// kustomizeBuild prints what `kustomize build dir` prints.
func kustomizeBuild(dir string) error {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return err
	}
	yaml, err := resources.AsYaml()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(yaml)
	return err
}
