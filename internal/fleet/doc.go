// Package fleet answers the question platform teams ask most: which cluster
// runs which version of each component, and which are behind.
//
// Each Sync target reports the container images it applied in
// status.targets[].components (apply.AppliedComponents computes them from
// the objects of a revision). Build turns Syncs, ImagePolicies, ImageRepositories and
// UpdateAutomations into a Table: one row per component (an ImagePolicy
// whose image a Sync deploys), one column per Sync target, each cell the
// version that target runs and how it compares with the version Git wants
// (the policy's latest ref): up to date, behind, held (a revert holds the
// latest version, so Git keeps the previous one), waiting in a rollout
// wave, or ahead (Git holds a higher version than the policy selects, a
// refused downgrade). Render prints a Table as kubectl prints objects;
// Load lists the objects Build needs with a controller-runtime client.
//
// Build and Render are pure; only Load talks to a cluster.
package fleet
