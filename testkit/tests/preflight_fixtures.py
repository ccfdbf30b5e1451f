"""Resources for scripts/preflight's test, created in moto (testkit/tests/preflight.rs).

    python preflight_fixtures.py good|dev|endpoints|bad [NAME]   (endpoint and region from the environment)

Prints what the samconfig.toml under test needs, as JSON. `good` is an account ready for
production, where the stack `triage-good` is already deployed; `dev` one for a smoke test
(endpoints instead of NAT, the master secret, no topic, max_connections set in a parameter
group); `endpoints` is `dev` without the EventBridge endpoint (Secrets Manager, SQS and S3
only); `bad` gets something wrong in every check. NAME (default: the mode) names what is
created, so one moto holds the same mode twice.
"""
import json
import sys

import boto3

mode = sys.argv[1]
name = sys.argv[2] if len(sys.argv) > 2 else mode
smoke = mode in ("dev", "endpoints")
ec2 = boto3.client("ec2")
sm = boto3.client("secretsmanager")
rds = boto3.client("rds")
sns = boto3.client("sns")
region = ec2.meta.region_name

vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
subnets = [
    ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{region}{az}")["Subnet"]["SubnetId"]
    for i, az in enumerate("ab")
]
sg = ec2.create_security_group(GroupName=f"triage-lambda-{name}", Description="t", VpcId=vpc)["GroupId"]
db_sg = ec2.create_security_group(GroupName=f"triage-db-{name}", Description="t", VpcId=vpc)["GroupId"]
if mode != "bad":
    ec2.authorize_security_group_ingress(GroupId=db_sg, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 5432, "ToPort": 5432, "UserIdGroupPairs": [{"GroupId": sg}]}])
rt = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
for subnet in subnets:
    ec2.associate_route_table(RouteTableId=rt, SubnetId=subnet)
if mode == "good":
    public = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.9.0/24")["Subnet"]["SubnetId"]
    eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=public, AllocationId=eip)["NatGateway"]["NatGatewayId"]
    ec2.create_route(RouteTableId=rt, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
if mode != "bad":
    ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{region}.s3", VpcEndpointType="Gateway", RouteTableIds=[rt])
if smoke:
    # No NAT: endpoints alone, enough for Provider=rules (the deliverer's EventBridge included,
    # except in `endpoints`).
    for service in ("secretsmanager", "sqs", "events") if mode == "dev" else ("secretsmanager", "sqs"):
        ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{region}.{service}",
                                VpcEndpointType="Interface", SubnetIds=subnets, SecurityGroupIds=[sg],
                                PrivateDnsEnabled=True)
if mode == "bad":
    # One more subnet, public: its default route goes to an internet gateway.
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    public_rt = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=public_rt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    public = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.9.0/24", AvailabilityZone=f"{region}a")["Subnet"]["SubnetId"]
    ec2.associate_route_table(RouteTableId=public_rt, SubnetId=public)
    subnets.append(public)

# The password is what the test looks for in the script's output: it must never appear.
password = "pw-" + name + "-never-printed"
login = {"username": "triage", "password": password, "host": None, "port": 5432, "dbname": "triage"}
# max_connections: `good` from RDS's default for db.t4g.large (about 810), `bad` from the
# default for db.t4g.small (about 200, below the default fleet's 404), `dev` set in a group.
parameter_group = {}
if smoke:
    rds.create_db_parameter_group(DBParameterGroupName=f"triage-{name}", DBParameterGroupFamily="postgres16", Description="t")
    rds.modify_db_parameter_group(DBParameterGroupName=f"triage-{name}", Parameters=[
        {"ParameterName": "max_connections", "ParameterValue": "150", "ApplyMethod": "pending-reboot"}])
    parameter_group = {"DBParameterGroupName": f"triage-{name}"}
instance = rds.create_db_instance(
    DBInstanceIdentifier=f"triage-{name}", Engine="postgres",
    EngineVersion="15.8" if mode == "bad" else "16.4",
    DBInstanceClass="db.t4g.large" if mode == "good" else "db.t4g.small", AllocatedStorage=20,
    VpcSecurityGroupIds=[db_sg], MasterUsername="triage_admin", MasterUserPassword="master-pw-never-printed",
    DBName="triage", **parameter_group,
)["DBInstance"]
host = rds.describe_db_instances(DBInstanceIdentifier=instance["DBInstanceIdentifier"])["DBInstances"][0]["Endpoint"]["Address"]
login["host"] = host
if mode == "bad":
    # The master user, and a port that is no number.
    login["username"] = "triage_admin"
    login["port"] = "not-a-port"
if smoke:
    # What RDS keeps for --manage-master-user-password: DbHost and DbName complete it.
    login = {"username": "triage_admin", "password": password}
db_secret = sm.create_secret(Name=f"triage/db-{name}", SecretString=json.dumps(login))["ARN"]
out = {
    "region": region,
    "subnets": ",".join(subnets),
    "sg": sg,
    "db_secret": db_secret,
    "password": password,
    "db_instance": instance["DBInstanceIdentifier"],
    "db_host": host,
}
if smoke:
    pass
elif mode == "good":
    out["provider_secret"] = sm.create_secret(Name="triage/provider", SecretString="sk-never-printed")["ARN"]
    api_login = dict(login, username="triage_api_login", password="api-" + password)
    out["api_db_secret"] = sm.create_secret(Name="triage/db-api", SecretString=json.dumps(api_login))["ARN"]
    deliver_login = dict(login, username="triage_deliver_login", password="deliver-" + password)
    out["deliverer_db_secret"] = sm.create_secret(Name="triage/db-deliver", SecretString=json.dumps(deliver_login))["ARN"]
    # The stack already deployed: its worker holds its reservation (the Lambda stand-in says
    # how much), which the preflight must not count twice.
    iam = boto3.client("iam")
    role = iam.create_role(RoleName="triage-good-worker", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                                                "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
    boto3.client("cloudformation").create_stack(StackName="triage-good", TemplateBody=json.dumps({"Resources": {
        "WorkerFunction": {"Type": "AWS::Lambda::Function", "Properties": {
            "FunctionName": "triage-good-WorkerFunction-AbC123", "Runtime": "python3.12", "Handler": "x.h",
            "Role": role, "Code": {"ZipFile": "def h(event, context): pass"}}}}}))
    topic = sns.create_topic(Name="triage-alarms")["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="email", Endpoint="oncall@example.com")
    out["topic"] = topic
else:
    account = db_secret.split(":")[4]
    out["provider_secret"] = f"arn:aws:secretsmanager:{region}:{account}:secret:triage/provider-AbCdEf"
    out["topic"] = f"arn:aws:sns:{region}:{account}:no-such-topic"
print(json.dumps(out))
