//! The template's dependency graph, read from its text as CloudFormation reads it (issue 51,
//! item 1): a resource waits for every resource it names (`!Ref`, `!GetAtt`, `${...}`, anywhere
//! in its block, `Metadata` included) and every one in its `DependsOn`. A stage whose route
//! settings name a route that is created after it fails the deploy ("Unable to find Route by
//! key"), on a first create and on the update that adds the route; cfn-lint does not see it
//! (scripts/validate-template runs it beside this).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use testkit::template::resources;

fn template() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    std::fs::read_to_string(path).unwrap()
}

/// The identifiers a block names, whatever the syntax (a superset; only resources count).
fn names(block: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect()
    };
    for line in block.lines() {
        let code = line.split(" #").next().unwrap_or("");
        for marker in ["!Ref ", "!GetAtt ", "${", "DependsOn: ", "Ref: "] {
            for (i, _) in code.match_indices(marker) {
                names.insert(ident(&code[i + marker.len()..]));
            }
        }
        // A `DependsOn:` list's items, and list forms of the above.
        if let Some(item) = code.trim().strip_prefix("- ") {
            names.insert(ident(item));
        }
    }
    names
}

/// Everything `resource` waits for, directly or through others.
fn waits_for(blocks: &BTreeMap<String, String>, resource: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut next = vec![resource.to_string()];
    while let Some(name) = next.pop() {
        for named in names(&blocks[&name]) {
            if blocks.contains_key(&named) && seen.insert(named.clone()) {
                next.push(named);
            }
        }
    }
    seen
}

/// The route keys a stage's `RouteSettings` name (`METHOD /path:` map keys).
fn route_settings_keys(stage: &str) -> Vec<String> {
    let methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "ANY"];
    stage
        .lines()
        .map(|line| line.trim().trim_start_matches("- "))
        .filter(|line| methods.iter().any(|m| line.starts_with(&format!("{m} /"))))
        .filter_map(|line| line.strip_suffix(':'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_stage_waits_for_each_route_its_route_settings_name() {
    let template = template();
    let blocks = resources(&template);
    let stages: Vec<_> = blocks
        .iter()
        .filter(|(_, block)| block.contains("Type: AWS::ApiGatewayV2::Stage"))
        .collect();
    assert!(!stages.is_empty(), "the template has a stage");
    let mut checked = 0;
    for (stage, block) in stages {
        let waits = waits_for(&blocks, stage);
        for key in route_settings_keys(block) {
            let routes: Vec<_> = blocks
                .iter()
                .filter(|(_, b)| b.lines().any(|l| l.trim() == format!("RouteKey: {key}")))
                .map(|(name, b)| (name.clone(), b.clone()))
                .collect();
            assert_eq!(routes.len(), 1, "one route has the key {key}: {routes:?}");
            let (route, route_block) = &routes[0];
            assert!(
                waits.contains(route),
                "{stage}'s route settings name {key}, but it does not wait for {route}"
            );
            // A conditional route is named under its own condition, or a deploy without it
            // refers to a resource that does not exist.
            if let Some(condition) = route_block
                .lines()
                .find_map(|l| l.trim().strip_prefix("Condition: "))
            {
                let under = block
                    .lines()
                    .filter(|l| l.contains(&format!("!Ref {route}")))
                    .all(|l| l.contains(&format!("!If [{condition},")));
                assert!(
                    under,
                    "{stage} names {route} outside !If [{condition}, ...]"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "the Zendesk route's settings were checked");
}

#[test]
fn the_graph_reader_sees_a_missing_dependency() {
    let template = "Resources:\n  Stage:\n    Type: AWS::ApiGatewayV2::Stage\n    \
                    Properties:\n      RouteSettings:\n        POST /x:\n          A: 1\n  \
                    Route:\n    Type: AWS::ApiGatewayV2::Route\n    Properties:\n      \
                    RouteKey: POST /x\n      Target: !Sub integrations/${Integration}\n  \
                    Integration:\n    Type: AWS::ApiGatewayV2::Integration\nOutputs:\n  \
                    X: !Ref Stage\n";
    let blocks = resources(template);
    assert_eq!(blocks.len(), 3);
    assert_eq!(route_settings_keys(&blocks["Stage"]), vec!["POST /x"]);
    assert!(!waits_for(&blocks, "Stage").contains("Route"));
    assert!(waits_for(&blocks, "Route").contains("Integration"));
}
