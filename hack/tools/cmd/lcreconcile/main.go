// Command lcreconcile stands in for a GitOps controller in the e2e suite: every interval it
// server-side applies the objects of a manifest with Flux's own apply library
// (github.com/fluxcd/pkg/ssa), forcing field ownership, under a field manager of the caller's
// choice, until it is interrupted.
//
// As -manager kustomize-controller (-flux) it does what kustomize-controller does on each
// reconcile of a Kustomization: dry-run the apply, skip an object that has not drifted, strip
// the ownership of the managers "kubectl" (Apply and Update) and "before-first-apply", then
// apply with ForceOwnership. As -manager argocd-controller it applies the same way without the
// cleanup, which is what Argo CD's self-heal does with ServerSideApply=true. It does not
// reproduce Argo CD's three-way (client-side) diff, its ignoreDifferences, sync waves or hooks,
// nor the Application or Kustomization objects themselves: there is nothing to suspend, only the
// process to stop.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	file := flag.String("f", "", "manifest to apply (YAML, one or more objects)")
	namespace := flag.String("n", "", "namespace of the objects that name none")
	manager := flag.String("manager", "kustomize-controller", "field manager to apply as")
	flux := flag.Bool("flux", false, "strip the ownership of kubectl and before-first-apply before each apply, as kustomize-controller does")
	interval := flag.Duration("interval", 2*time.Second, "time between applies")
	once := flag.Bool("once", false, "apply once and exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *file, *namespace, *manager, *flux, *interval, *once); err != nil {
		fmt.Fprintln(os.Stderr, "lcreconcile:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, file, namespace, manager string, flux bool, interval time.Duration, once bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	objects, err := utils.ReadObjects(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	for _, o := range objects {
		if o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
	}
	rm := ssa.NewResourceManager(c, nil, ssa.Owner{Field: manager, Group: "kustomize.toolkit.fluxcd.io"})
	opts := ssa.DefaultApplyOptions()
	opts.Force = true
	if flux {
		// kustomize-controller's default cleanup list (its fieldManagers in the controller).
		opts.Cleanup = ssa.ApplyCleanupOptions{FieldManagers: []ssa.FieldManager{
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
		}}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		apply(ctx, rm, objects, opts, os.Stdout)
		if once {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// apply applies every object once, saying what changed; an error is said and the next tick
// tries again, as a controller's next reconcile would.
func apply(ctx context.Context, rm *ssa.ResourceManager, objects []*unstructured.Unstructured, opts ssa.ApplyOptions, out io.Writer) {
	for _, o := range objects {
		entry, err := rm.Apply(ctx, o.DeepCopy(), opts)
		if err != nil {
			fmt.Fprintf(out, "%s %s: %v\n", time.Now().Format(time.RFC3339), utils.FmtUnstructured(o), err)
			continue
		}
		if entry.Action != ssa.UnchangedAction {
			fmt.Fprintf(out, "%s %s\n", time.Now().Format(time.RFC3339), entry.String())
		}
	}
}
