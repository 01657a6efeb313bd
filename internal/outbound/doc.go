// Package outbound is the manager's one way out: every call to a host that
// an object names (registries, Git over HTTP(S) and SSH, forges and the
// GitHub App token exchange, Helm repositories, feeds, asset hosts,
// signature stores) is made with a transport or a dialer from here.
//
// It refuses connections to addresses an operator has ruled out
// (--registry-deny-cidrs), such as the cloud metadata services. The check
// runs when a connection is dialled, on the address it actually goes to,
// so a name that resolves to an allowed address when it is checked and to
// a denied one when it is used (DNS rebinding) is still refused.
//
// Nothing else in the manager builds an HTTP client or a dialer for such a
// call; TestOneWayOut (oneway_test.go) fails any that does.
package outbound
