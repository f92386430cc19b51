// Package stacks holds one test, TestEveryWayIn: 20 parallel duplicates of a new key through
// every documented way into net/http, echo, gin, fiber (v2 and v3) and Huma, also under
// otelhttp, and through the bridges idemgen refuses, on PostgreSQL. It is a module of its own
// so that idemgen's module does not depend on the frameworks.
package stacks
