// Package stabilitystudy is the training-stability study of issue #16.
package stabilitystudy
