// Command etcd is the etcd server Kubernetes v1.37 requires, built from the module proxy
// because Debian's etcd is too old.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
