# One PostgreSQL stream in private subnets without NAT: the function reaches the database
# inside the VPC and every AWS service it calls through a VPC endpoint — S3 and DynamoDB
# (gateway), Secrets Manager and Step Functions (interface). docs/aws.md#private-networks
# lists the services the binary calls; tests/cli/terraform.rs checks that list against the
# SDK clients in src/ and that this example has an endpoint for each. The function's logs
# and EMF metrics need no endpoint: Lambda delivers them outside the VPC.


resource "aws_security_group" "function" {
  name        = "sluice-function"
  description = "sluice drain function: HTTPS to the VPC endpoints, the database port to the database"
  vpc_id      = var.vpc_id
}

resource "aws_vpc_security_group_egress_rule" "https_to_endpoints" {
  security_group_id = aws_security_group.function.id
  description       = "HTTPS to the VPC's interface endpoints (and the gateway endpoints' prefix lists)"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_egress_rule" "database" {
  security_group_id            = aws_security_group.function.id
  description                  = "The source database"
  ip_protocol                  = "tcp"
  from_port                    = var.database_port
  to_port                      = var.database_port
  referenced_security_group_id = var.database_security_group_id
}

resource "aws_vpc_security_group_ingress_rule" "database_from_function" {
  security_group_id            = var.database_security_group_id
  description                  = "sluice drain function"
  ip_protocol                  = "tcp"
  from_port                    = var.database_port
  to_port                      = var.database_port
  referenced_security_group_id = aws_security_group.function.id
}

resource "aws_security_group" "endpoints" {
  name        = "sluice-endpoints"
  description = "Interface endpoints used by sluice: HTTPS from the function"
  vpc_id      = var.vpc_id
}

resource "aws_vpc_security_group_ingress_rule" "endpoints_from_function" {
  security_group_id            = aws_security_group.endpoints.id
  description                  = "HTTPS from the sluice function"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = aws_security_group.function.id
}

# The AWS services the binary calls (docs/aws.md#private-networks), by endpoint type,
# sorted (tests/cli/terraform.rs compares them with that table).
locals {
  gateway_services   = ["dynamodb", "s3"]
  interface_services = ["glue", "s3tables", "secretsmanager", "states"]
}

resource "aws_vpc_endpoint" "gateway" {
  for_each          = toset(local.gateway_services)
  vpc_id            = var.vpc_id
  service_name      = "com.amazonaws.${var.region}.${each.value}"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = var.route_table_ids
}

resource "aws_vpc_endpoint" "interface" {
  for_each            = toset(local.interface_services)
  vpc_id              = var.vpc_id
  service_name        = "com.amazonaws.${var.region}.${each.value}"
  vpc_endpoint_type   = "Interface"
  subnet_ids          = var.subnet_ids
  security_group_ids  = [aws_security_group.endpoints.id]
  private_dns_enabled = true
}

module "stack" {
  source      = "../../modules/sluice_stack"
  name        = "sluice"
  bucket_name = var.bucket_name
}

module "orders" {
  source       = "../../modules/sluice_table"
  stack        = module.stack.for_tables
  package_path = var.package_path

  job        = "private-orders"
  engine     = "postgres"
  secret_arn = var.postgres_secret_arn
  tables     = ["public.orders"]
  postgres = {
    slot        = "sluice_private_orders"
    publication = "sluice_private_orders"
  }
  initial                = "snapshot"
  baseline_state_machine = true

  vpc = {
    subnet_ids         = var.subnet_ids
    security_group_ids = [aws_security_group.function.id]
  }

  # The endpoints must exist before the first run needs them.
  depends_on = [aws_vpc_endpoint.gateway, aws_vpc_endpoint.interface]
}
