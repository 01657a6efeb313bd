package apply

// Owner names who applies a set, as the values of OwnerNameLabel and
// OwnerNamespaceLabel: for a Sync, its namespace and the label value of
// its name (each at most 63 characters, valid label values).
type Owner struct {
	// Name is the value of OwnerNameLabel.
	Name string
	// Namespace is the value of OwnerNamespaceLabel.
	Namespace string
}

// IsZero tells whether o names nobody.
func (o Owner) IsZero() bool { return o.Name == "" && o.Namespace == "" }

// labels returns o's labels.
func (o Owner) labels() map[string]string {
	return map[string]string{OwnerNameLabel: o.Name, OwnerNamespaceLabel: o.Namespace}
}
