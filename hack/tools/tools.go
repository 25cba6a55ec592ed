//go:build tools

// Package tools pins the Helm 4 CLI the e2e suite installs charts with.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
