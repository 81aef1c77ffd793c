// Package coded is the typed error of the packages whose failures are a
// stable code, a sentence and details (explain, replay, audit): one definition,
// instantiated with each package's own Code type so that their codes and
// errors stay distinct types.
package coded
